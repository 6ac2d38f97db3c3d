"""Releasing the waiting children of a completed spawner together (the settle's step 2, see
:mod:`.settle`): a spawned child's only parent is its spawner, so once that completed each
of its waiting children is released, none read or decided (the store's ``release_spawned``,
:data:`CHUNK` a statement).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.workflows import Workflow
from jobscheduler.roles.deps import Deps

log = logging.getLogger(__name__)

#: Children released per statement.
CHUNK = 500


@attrs.define
class Settled:
    """What one :meth:`.settle.Settler.settle` did."""

    released: int = 0
    cancelled: int = 0
    finished: list[Workflow] = attrs.Factory(list)


class SpawnedRelease:
    """Releases completed spawners' waiting children (see the module docstring); ``by``
    names the settler, in the metrics."""

    def __init__(self, deps: Deps, *, by: str) -> None:
        self._deps = deps
        self._by = by

    async def release(self, record: Workflow, ends: Sequence[Job], done: Settled) -> set[str]:
        """Release the waiting children of each completed spawner among ``ends`` (not when
        the workflow's cancel was requested: the settle cancels them one by one). Returns
        the ids of the spawners done so."""
        if record.cancel_requested_at is not None:
            return set()
        spawners = [
            end
            for end in ends
            if end.status is Status.COMPLETED and end.step is not None and end.step.spawns
        ]
        for spawner in spawners:
            while await self._chunk(spawner, done):
                pass  # until none is left: another settler may be releasing them too
        return {spawner.id for spawner in spawners}

    async def _chunk(self, spawner: Job, done: Settled) -> int:
        """Release up to CHUNK of ``spawner``'s waiting children; how many."""
        deps = self._deps
        now = deps.clock.now()
        released = await deps.store.release_spawned(spawner.id, now, CHUNK)
        if released:
            done.released += released
            deps.metrics.workflow_steps_settled.labels(outcome="released", by=self._by).inc(
                released
            )
            if deps.waker is not None:
                deps.waker.notify(now)
            log.debug(
                "spawned workflow steps released",
                extra={
                    "job_id": spawner.id,
                    "tenant": spawner.tenant_id,
                    "workflow_id": spawner.workflow_id,
                    "released": released,
                },
            )
        return released
