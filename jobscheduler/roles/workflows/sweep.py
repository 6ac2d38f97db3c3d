"""The reaper's sweeps of workflows: what no one settled, and creates that never finished.

- :func:`settle_marked`: steps still marked (``step_dirty``) some time after their mark --
  their end's writer crashed, or its settle failed -- are settled now, so a step whose
  parents are done is released even when whoever ended them did not live to do it;
- :func:`finish_creates`: records still ``creating`` after CREATE_GRACE are opened (every
  step stored) or given up (:func:`.create.finish_creating`).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from jobscheduler.domain.workflows import WorkflowStatus
from jobscheduler.roles.deps import Deps
from jobscheduler.store.workflows import WorkflowQuery

from .create import CREATE_GRACE, finish_creating
from .settle import Settler

log = logging.getLogger(__name__)

#: Marked steps read per round trip by the sweep.
SETTLE_BATCH = 500
#: How long after its mark a step is the sweep's (before, its end's writer is expected to
#: settle it: the sweep would only repeat that work).
SETTLE_GRACE = 5.0
#: Records looked at per sweep of creates.
CREATES_BATCH = 100


async def settle_marked(deps: Deps, *, grace: float = SETTLE_GRACE) -> int:
    """Settle every step marked more than ``grace`` seconds ago; returns how many were
    looked at. Raises StoreError if the store fails."""
    settler = Settler(deps, by="reaper")
    seen: set[str] = set()
    while True:
        before = deps.clock.now() - timedelta(seconds=grace)
        batch = [
            job
            for job in await deps.store.steps_to_settle(before, SETTLE_BATCH)
            if job.id not in seen  # a step left marked (its workflow is being stored)
        ]
        if not batch:
            break
        seen.update(job.id for job in batch)
        done = await settler.settle(batch)
        if done.released or done.cancelled:
            log.info(
                "reaper settled workflow steps",
                extra={"steps": len(batch), "released": done.released, "cancelled": done.cancelled},
            )
    return len(seen)


async def finish_creates(deps: Deps) -> int:
    """Open or give up every record ``creating`` for longer than CREATE_GRACE; returns how
    many. Raises StoreError if the store fails."""
    before = deps.clock.now() - timedelta(seconds=CREATE_GRACE)
    query = WorkflowQuery(
        tenant_id=None, statuses=(WorkflowStatus.CREATING,), created_before=before
    )
    stale = await deps.store.find_workflows(query, CREATES_BATCH)
    for record in stale:
        outcome = await finish_creating(deps, record)
        log.warning(
            "workflow left creating by its create",
            extra={"workflow_id": record.id, "tenant": record.tenant_id, "outcome": outcome},
        )
    return len(stale)
