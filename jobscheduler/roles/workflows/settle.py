"""Acting on the ends of workflow steps: release or cancel the steps waiting for them, and
finish the workflow once nothing is left to run (:mod:`.finish`).

Every transition that ends a step marks it (``step_dirty``). :class:`Settler` takes marked
steps (as their writer holds them, or as the reaper's sweep reads them) and, per workflow:

1. reads the record: a workflow still being stored (``creating``) is left to its create or
   to the reaper; one whose cancel was requested has its waiting steps cancelled;
2. releases the waiting children of each completed spawner together (their only parent:
   nothing to read or decide; :mod:`.release`); reads the other waiting
   steps the ends may free (each end's ``children``, and the waiting children of a spawner
   that did not complete), and every job those wait for;
3. decides each: **release** (every parent completed -- and the children spawned by each
   step in its ``afterChildrenOf``; or, with ``onParentFailure: "run"``, every one ended),
   **cancel** (one ended in dlq or cancelled), or leave it waiting; and writes the
   releases and cancels in batches of 500 (a fan-out's first children start while the
   rest are written). A cancelled step ends too: its own children are decided next, so a
   failure cascades through every descendant in one call;
4. if nothing was released (nor left waiting), finishes the record once no step is unfinished
   (:data:`~jobscheduler.domain.workflows.OUTCOMES`: a probe each, no step read), conditioned
   on the version read;
5. only then clears the marks of the steps it acted on (:func:`states.settle_step
   <jobscheduler.domain.states.settle_step>`, conditioned on the version acted on) -- in
   the round trip of the last releases decided step by step when there are some (the
   workflow cannot finish then); else in one of their own (the store's ``clear_marks``: a
   fan-out's ends are cleared a few hundred at a time).

Each write is a conditional transition on the version read, so any number of settlers may
act on one workflow at once (an executor's fast path, the reaper's sweep, the API): a step is
released once, a stale decision does not apply. A crash anywhere leaves a mark the reaper's
sweep finds, so no step whose parents are done waits for ever. Releasing on a read of
``completed`` parents is safe however late: ``completed`` is never left.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.steps import OnParentFailure
from jobscheduler.domain.workflows import UNFINISHED_STEPS, Workflow, WorkflowStatus
from jobscheduler.errors import WorkflowNotFound
from jobscheduler.roles.deps import Deps
from jobscheduler.store.query import JobQuery

from .finish import finish_if_ended
from .reads import read_jobs, spawned_by
from .release import Settled, SpawnedRelease

log = logging.getLogger(__name__)

#: Statuses of a job that ended without completing (a step waiting for it is cancelled).
FAILED_ENDS: tuple[Status, ...] = (Status.DLQ, Status.CANCELLED, Status.FAILED)
_ENDED = frozenset({Status.COMPLETED, *FAILED_ENDS})
#: Bound of one settle's rounds (each a level of a cascade): more than any workflow's depth.
MAX_ROUNDS = 10_000
#: Decisions written per round trip: the first children of a large fan-out are claimed
#: while the rest are still being released.
RELEASE_CHUNK = 500


@attrs.frozen
class _Decision:
    step: Job
    change: states.Change | None
    #: The parent whose failure cancels the step (to undo if that parent is retried).
    because: str | None = None


class Settler:
    """Settles marked steps (see the module docstring); ``by`` names who, in the metrics."""

    def __init__(self, deps: Deps, *, by: str) -> None:
        self._deps = deps
        self._by = by
        self._release = SpawnedRelease(deps, by=by)

    async def settle(self, steps: Iterable[Job]) -> Settled:
        """Act on ``steps`` (marked workflow steps, as last read or written), workflow by
        workflow. Raises StoreError if the store fails (the marks stay for the sweep)."""
        by_workflow: dict[str, list[Job]] = {}
        for job in steps:
            if job.workflow_id is not None and job.step is not None:
                by_workflow.setdefault(job.workflow_id, []).append(job)
        done = Settled()
        for workflow_id, seeds in by_workflow.items():
            await self._settle_workflow(workflow_id, seeds, done)
        return done

    async def _settle_workflow(self, workflow_id: str, seeds: list[Job], done: Settled) -> None:
        store = self._deps.store
        try:
            record = await store.get_workflow(workflow_id, steps=False)
        except WorkflowNotFound:
            log.error(
                "workflow steps without a workflow record; marks cleared",
                extra={"workflow_id": workflow_id, "steps": len(seeds)},
            )
            await store.clear_marks([s for s in seeds if s.step_dirty])
            return
        if record.status is WorkflowStatus.CREATING:
            return  # its create (or the reaper's sweep of creates) opens it first
        known: dict[str, Job] = {s.id: s for s in seeds}
        to_clear: list[Job] = []
        frontier = seeds
        released_before = done.released
        # A step seen waiting and left so: the workflow cannot be finished yet (that step's
        # own end, later, settles and finishes it), so no need to ask the store.
        left_waiting = False
        for _ in range(MAX_ROUNDS):
            if not frontier:
                break
            ends = [s for s in frontier if s.status in _ENDED]
            to_clear += [s for s in frontier if s.step_dirty and s.status is not Status.WAITING]
            together = await self._release.release(record, ends, done)
            candidates = await self._waiting_for(
                ends, [s for s in frontier if s.status is Status.WAITING], together
            )
            decisions = await self._decide(record, candidates, known)
            left_waiting = left_waiting or any(d.change is None for d in decisions)
            frontier = await self._apply(decisions, known, done, to_clear)
        if done.released == released_before and not left_waiting:
            finished = await finish_if_ended(self._deps, record)
            if finished is not None:
                done.finished.append(finished)
        if to_clear:
            await store.clear_marks(to_clear)

    async def _waiting_for(
        self, ends: Sequence[Job], waiting: Sequence[Job], released: set[str]
    ) -> list[Job]:
        """The waiting steps ``ends`` may free (their children, and the children they
        spawned unless ``released`` already), with the ``waiting`` steps given, each once,
        freshly read."""
        ids = list(dict.fromkeys(c for end in ends if end.step for c in end.step.children))
        ids += [s.id for s in waiting if s.id not in ids]
        found = await self._read(ids)
        for end in ends:
            if end.step is not None and end.step.spawns and end.id not in released:
                found += await self._spawned(end.id, Status.WAITING)
        unique = {job.id: job for job in found}
        return [job for job in unique.values() if job.status is Status.WAITING and job.step]

    async def _read(self, ids: Sequence[str]) -> list[Job]:
        return await read_jobs(self._deps.store, ids)

    async def _spawned(self, spawner: str, status: Status) -> list[Job]:
        return await spawned_by(self._deps.store, spawner, status)

    async def _decide(
        self, record: Workflow, candidates: Sequence[Job], known: dict[str, Job]
    ) -> list[_Decision]:
        now = self._deps.clock.now()
        if record.cancel_requested_at is not None:
            reason = "its workflow was cancelled"
            return [_Decision(c, states.cancel_step(c, now=now, reason=reason)) for c in candidates]
        wanted = {p for c in candidates if c.step for p in c.step.parents} - known.keys()
        for job in await self._read(list(wanted)):
            known[job.id] = job
        chords: dict[str, Status | None] = {}
        decisions = []
        for step in candidates:
            decisions.append(await self._decide_one(step, known, chords, now))
        return decisions

    async def _decide_one(
        self,
        step: Job,
        known: dict[str, Job],
        chords: dict[str, Status | None],
        now: datetime,
    ) -> _Decision:
        assert step.step is not None
        parents = [known.get(p) for p in step.step.parents]
        missing = [p for p, job in zip(step.step.parents, parents, strict=True) if job is None]
        if missing:
            reason = f"a step it waits for no longer exists ({missing[0]})"
            return _Decision(step, states.cancel_step(step, now=now, reason=reason))
        present = [p for p in parents if p is not None]
        if any(p.status not in _ENDED for p in present):
            return _Decision(step, None)
        failed = next((p for p in present if p.status is not Status.COMPLETED), None)
        children_failed: Job | None = None
        for spawner_id in step.step.after_children_of:
            # Asked of the store whatever ``spawns`` says: the step may have been read
            # before its attempt spawned.
            state = await self._children_state(spawner_id, chords)
            if state is None:
                return _Decision(step, None)  # a child it spawned is unfinished
            if state is not Status.COMPLETED and children_failed is None:
                children_failed = known[spawner_id]
        if step.step.on_parent_failure is OnParentFailure.RUN or (
            failed is None and children_failed is None
        ):
            return _Decision(step, states.release_step(step, now=now))
        if failed is not None:
            reason = f"{_name(failed)} ended {failed.status.value}"
        else:
            assert children_failed is not None
            failed = children_failed
            reason = f"a step {_name(failed)} spawned ended in dlq or cancelled"
        return _Decision(step, states.cancel_step(step, now=now, reason=reason), failed.id)

    async def _children_state(self, spawner: str, cache: dict[str, Status | None]) -> Status | None:
        """The spawned children of ``spawner``, as one status: None while one is unfinished,
        DLQ when one ended without completing, else COMPLETED (none, or all completed)."""
        if spawner not in cache:
            store = self._deps.store
            if await store.any_job(
                JobQuery(tenant_id=None, spawned_by=spawner, statuses=UNFINISHED_STEPS)
            ):
                cache[spawner] = None
            elif await store.any_job(
                JobQuery(tenant_id=None, spawned_by=spawner, statuses=FAILED_ENDS)
            ):
                cache[spawner] = Status.DLQ
            else:
                cache[spawner] = Status.COMPLETED
        return cache[spawner]

    async def _apply(
        self,
        decisions: Sequence[_Decision],
        known: dict[str, Job],
        done: Settled,
        to_clear: list[Job],
    ) -> list[Job]:
        """Write the decisions; returns what they cancelled (ended: next round's ends) and
        the cancelled steps put back to waiting because their failed parent was retried.
        Written RELEASE_CHUNK at a time; the marks with the last (a crash between leaves
        them for the sweep, which settles the rest: the written ones no longer apply)."""
        acting = [d for d in decisions if d.change is not None]
        to_clear += [d.step for d in decisions if d.change is None and d.step.step_dirty]
        if not acting:
            return []
        clears: list[states.Change] = []
        if any(d.change is not None and d.change.transition == "release_step" for d in acting):
            # A release: the workflow does not finish in this settle, so the marks acted
            # on so far go in the same round trip as the last releases (else after the
            # finish: step 5).
            clears = [states.settle_step(step) for step in to_clear]
            to_clear.clear()
        cancelled: list[tuple[_Decision, Job]] = []
        for start in range(0, len(acting), RELEASE_CHUNK):
            chunk = acting[start : start + RELEASE_CHUNK]
            last = start + RELEASE_CHUNK >= len(acting)
            cancelled += await self._write(chunk, clears if last else [], known, done)
        return await self._undo_stale_cancels(cancelled, known)

    async def _write(
        self,
        acting: Sequence[_Decision],
        clears: Sequence[states.Change],
        known: dict[str, Job],
        done: Settled,
    ) -> list[tuple[_Decision, Job]]:
        """Write ``acting``'s changes (and ``clears``) in one round trip, waking the
        scheduler for what it released; returns what it cancelled."""
        deps = self._deps
        changes = [d.change for d in acting if d.change is not None]
        # A release's row is not read back (the step as released is the step as read with
        # the change's fields: nothing else moves a waiting step); a cancel's is.
        read_back = [change.transition != "release_step" for change in changes]
        results = (
            await deps.store.apply_many_lean(
                [*changes, *clears], [*read_back, *(False for _ in clears)]
            )
        )[: len(changes)]
        cancelled: list[tuple[_Decision, Job]] = []
        due: list[datetime] = []
        for decision, result in zip(acting, results, strict=True):
            assert decision.change is not None
            if result is False:
                deps.metrics.transitions_lost.labels(transition=decision.change.transition).inc()
                continue
            after = (
                result
                if isinstance(result, Job)
                else attrs.evolve(decision.step, **decision.change.set)
            )
            known[after.id] = after
            if after.status is Status.PENDING:
                done.released += 1
                due.append(after.scheduled_at)
                deps.metrics.workflow_steps_settled.labels(outcome="released", by=self._by).inc()
            else:
                done.cancelled += 1
                cancelled.append((decision, after))
                deps.metrics.workflow_steps_settled.labels(outcome="cancelled", by=self._by).inc()
            log.debug(
                "workflow step settled",
                extra={
                    "job_id": after.id,
                    "tenant": after.tenant_id,
                    "workflow_id": after.workflow_id,
                    "status": after.status.value,
                },
            )
        if due and deps.waker is not None:
            deps.waker.notify(min(due))
        return cancelled

    async def _undo_stale_cancels(
        self, cancelled: list[tuple[_Decision, Job]], known: dict[str, Job]
    ) -> list[Job]:
        """The cancelled steps, except those whose failed parent was retried while they
        were being cancelled: those wait again (the retry may have looked for its cancelled
        descendants before this cancel landed)."""
        because = {d.because for d, _ in cancelled if d.because is not None}
        if not because:
            return [job for _, job in cancelled]
        fresh = {job.id: job for job in await self._read(list(because))}
        now = self._deps.clock.now()
        ends: list[Job] = []
        undo: list[states.Change] = []
        for decision, job in cancelled:
            parent = fresh.get(decision.because or "")
            if parent is not None and parent.status not in _ENDED:
                undo.append(states.retry_step(job, now=now))
            else:
                ends.append(job)
        waiting = [j for j in await self._deps.store.apply_many(undo) if j is not None]
        for job in waiting:
            known[job.id] = job
        return ends + waiting


def _name(job: Job) -> str:
    return job.step.name if job.step is not None else job.id
