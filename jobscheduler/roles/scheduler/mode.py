"""Whether the leader claims with flow control, and what it says when it does not."""

from __future__ import annotations

import logging

import trio

from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps

log = logging.getLogger(__name__)

#: Bound of reading the overrides for :func:`warn_unenforced_limits`.
OVERRIDES_TIMEOUT = 10.0


def flow_control_on(deps: Deps) -> bool:
    """``FLOW_CONTROL``: on, off, or (auto) on where the store's fair claim is indexed."""
    wanted = deps.settings.flow_control
    return deps.store.fair_claims_indexed if wanted is None else wanted


async def warn_unenforced_limits(deps: Deps) -> None:
    """With flow control off, log once (a leader's term) the job types that declare limits
    -- in their handlers, or by an admin's overrides -- since the plain claim does not
    enforce them."""
    types = set(deps.registry.limits())
    try:
        with trio.move_on_after(OVERRIDES_TIMEOUT):
            types.update(o.job_type for o in await deps.store.limit_overrides())
    except StoreError:
        pass  # a warning only: the pass that follows reports the store's failure
    if types:
        log.warning(
            "flow control is off: concurrency and rate limits are not enforced "
            "(FLOW_CONTROL=1 turns it on)",
            extra={"job_types": sorted(types)},
        )
