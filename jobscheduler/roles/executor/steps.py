"""The executor's side of workflows: it settles the steps whose end it wrote, at once.

When an outcome the executor writes ends a workflow step (completed, dlq, or cancelled while
running), the step is handed to :class:`StepEnds`, whose task settles the steps handed to it
together (:class:`~jobscheduler.roles.workflows.settle.Settler`): the steps waiting for them
are released (and the scheduler woken) or cancelled without waiting for the reaper. This is
only the fast way: a step the task never settles (the executor stopped, the store failed)
keeps its mark, and the reaper's sweep settles it.
"""

from __future__ import annotations

import logging
import math

import attrs
import trio

from jobscheduler._scopes import take_ready
from jobscheduler.domain.model import Job
from jobscheduler.errors import StoreError
from jobscheduler.observability.logthrottle import LogThrottle
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.workflows.settle import Settler

from .children import Children

log = logging.getLogger(__name__)

#: Bound of one settle (a store that hangs must not hold the steps after it for ever).
SETTLE_TIMEOUT = 30.0
#: After a settle whose ends freed nothing (they wait for more ends, as a fan-out's children
#: wait for their siblings), how long the next one waits, so the ends arriving meanwhile are
#: settled together: one settle's reads and writes for many ends, not for a few each time.
#: A settle that released, cancelled or finished something is followed at once (a chain).
GATHER = 0.1


class StepEnds:
    """Settles the workflow steps whose end this executor wrote (see the module doc)."""

    def __init__(self, deps: Deps, children: Children) -> None:
        self._settler = Settler(deps, by="executor")
        self._children = children
        self._send, self._receive = trio.open_memory_channel[Job](math.inf)
        self._running = False
        self._throttled = LogThrottle(log)

    def ended(self, job: Job) -> None:
        """``job`` (as its end wrote it) ended: settle it soon, if it is a workflow step.
        A completed step is kept as a parent: the steps it frees, run next, read its result
        from memory (a completed job never changes)."""
        if job.step is None:
            return
        if self._children.took_spawns(job.id):
            # The attempt spawned after the executor read the step: its end looks them up.
            job = attrs.evolve(job, step=attrs.evolve(job.step, spawns=True))
        self._children.completed_parents.add(job)
        if self._running and job.workflow_id is not None:
            self._send.send_nowait(job)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Settle the steps handed over, those waiting together, until cancelled."""
        self._running = True
        task_status.started()
        try:
            async for first in self._receive:
                batch = [first, *take_ready(self._receive)]
                idle = False
                with trio.move_on_after(SETTLE_TIMEOUT) as bounded:
                    try:
                        done = await self._settler.settle(batch)
                        idle = not (done.released or done.cancelled or done.finished)
                    except StoreError as exc:
                        self._throttled.log(
                            logging.WARNING,
                            "workflow steps not settled; the reaper's sweep will",
                            key="settle",
                            extra={"steps": len(batch), "error": str(exc)},
                        )
                        continue
                if bounded.cancelled_caught:
                    log.warning(
                        "workflow steps not settled in time; the reaper's sweep will",
                        extra={"steps": len(batch), "timeout": SETTLE_TIMEOUT},
                    )
                else:
                    self._throttled.recovered("settle", "workflow steps settled again")
                if idle:
                    await trio.sleep(GATHER)
        finally:
            self._running = False
