"""The scheduler role: while leading, claim due jobs, publish wake-ups, fire cron templates.

Only the elected leader dispatches; its loop runs inside the scope :func:`election.lead`
cancels the moment leadership is lost. Every write is safe if two instances briefly both
believe they lead: claims are conditional updates, instance keys derive from the fire time,
template moves are conditional on the old fire time.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

import trio

from jobscheduler.bus import WakeUp
from jobscheduler.domain.model import Job
from jobscheduler.election import Term, lead
from jobscheduler.errors import BusError, StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.presence import Presence

from .flow import FlowClaimer
from .mode import flow_control_on, warn_unenforced_limits
from .templates import UNREAD, NextDue, TemplatePass

log = logging.getLogger(__name__)

#: Pause before ticking again when something is due but the last tick took nothing; it
#: doubles while passes keep taking nothing, up to the tick.
STALL_PAUSE = 0.005
#: Upper bound of the claim batch while a tick works through a backlog.
MAX_CLAIM_BATCH = 500
#: Pause after a failed pass; it doubles while passes keep failing, up to MAX_ERROR_BACKOFF.
ERROR_BACKOFF = 1.0
MAX_ERROR_BACKOFF = 30.0
#: Bound of the publish inside a claim + publish unit, which leadership loss and shutdown
#: cannot interrupt (past it the claimed jobs are left queued for the reaper).
PUBLISH_TIMEOUT = 15.0
#: Upper bound of one claim's store call, shielded or not: a store that hangs (a stalled disk
#: under SQLite) must not hold a deposed leader or a shutdown for ever.
CLAIM_CALL_TIMEOUT = 10.0
#: How far ahead of its due time the dispatch loop claims a job. The claim's store round
#: trip (and any WAL checkpoint or lock wait it meets) then happens before the due instant,
#: and the wake-up goes out AT the due instant (:meth:`Scheduler._publish_on_time`), so a
#: job's start delay is the wake-up's precision, not a claim's latency. A job is never
#: published, so never picked, before it is due.
CLAIM_LEAD = 0.03
#: How long before the end of the stretch the last claim covered (its instant + CLAIM_LEAD)
#: the next claim begins while jobs keep coming due: the wake-ups of one claim wait for
#: their instants in a task of their own (:meth:`Scheduler._publish_later`) while the loop
#: claims on, so a claim meets the jobs it takes at least this long before the first is due,
#: and each claim still takes CLAIM_LEAD - CLAIM_SLACK of them.
CLAIM_SLACK = 0.01
#: Longest pause while due jobs wait for slots that only a finishing job frees (the
#: single-process deployment is woken at once by its executor instead).
SLOT_POLL = 0.05
#: Pause while due jobs wait for executors to take the queued ones ahead of them (a
#: queue that drains in milliseconds; woken at once by a pick in one process).
ROOM_POLL = 0.005


class Scheduler:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._tick = timedelta(seconds=deps.settings.scheduler_tick)
        self._templates = TemplatePass(deps)
        #: The fair, limited claim (None: FLOW_CONTROL off, the plain priority claim).
        self._flow = FlowClaimer(deps) if flow_control_on(deps) else None
        #: Claim lead of the dispatch loop (``tick`` claims only what is due).
        self._lead = timedelta(0)
        #: Where the dispatch loop's wake-ups due later than their claim wait for their
        #: instants (None: ``tick``, which publishes each claim's wake-ups before it returns).
        self._publishers: trio.Nursery | None = None
        #: The end of the stretch the last claim that took jobs covered.
        self._claimed_to: datetime | None = None
        self._stall = STALL_PAUSE
        self._error_backoff = ERROR_BACKOFF

    async def dispatch_loop(self, term: Term) -> None:
        """Tick until cancelled: spawn due cron instances, claim and publish every due job,
        then sleep until the next job is due, the tick elapses, or the waker fires."""
        log.info("dispatching", extra={"term": term.token, "leader_id": term.leader_id})
        if self._flow is None:
            await warn_unenforced_limits(self._deps)
        else:
            self._flow.begin_term()
        self._lead = timedelta(seconds=CLAIM_LEAD)
        # Leadership loss and shutdown cancel the loop, then wait here for the wake-ups
        # already claimed (each publish is shielded and bounded, as inside a claim).
        async with trio.open_nursery() as publishers:
            self._publishers = publishers
            try:
                await self._dispatch()
            finally:
                self._publishers = None

    async def _dispatch(self) -> None:
        metrics = self._deps.metrics
        while True:
            started = time.perf_counter()
            try:
                # The due jobs first: the template queries are not on their start's path.
                # Instances spawned now are claimed on the next pass, which follows at once
                # (``_sleep`` returns right away while something is due and progress is made).
                progress = await self._claim_all()
                await self._report_flow()
                fired, next_due = await self._templates.fire_due()
                await self._sleep(progress + fired, next_due)
            except StoreError as exc:
                metrics.scheduler_pass_errors.labels(kind="store").inc()
                log.error("scheduler pass failed", extra={"error": str(exc)})
                await self._back_off()
            except Exception as exc:
                # A bug or unexpected data must not end dispatching (nor, leader after
                # leader, every scheduler): report it, back off, go on.
                metrics.scheduler_pass_errors.labels(kind="unexpected").inc()
                log.exception("scheduler pass failed unexpectedly", extra={"error": repr(exc)})
                await self._back_off()
            else:
                self._error_backoff = ERROR_BACKOFF
            finally:
                metrics.scheduler_tick_duration.observe(time.perf_counter() - started)

    async def _back_off(self) -> None:
        await trio.sleep(self._error_backoff)
        self._error_backoff = min(self._error_backoff * 2, MAX_ERROR_BACKOFF)

    async def tick(self) -> int:
        """One pass: fire due templates, then claim and publish until no due job is left.

        Returns how many jobs were claimed.
        """
        await self._templates.fire_all()
        return await self._claim_all()

    async def _claim_all(self) -> int:
        """Claim and publish until no due job is left; returns how many were claimed.

        Claims start at CLAIM_BATCH per round trip (with flow control, at the room ahead of
        the executors once it is known) and double while batches come back full.
        """
        deps = self._deps
        batch = deps.settings.claim_batch
        if self._flow is not None:
            batch = min(self._flow.first_batch(batch), MAX_CLAIM_BATCH)
        claimed_total = 0
        while True:
            jobs = await self._claim_and_publish(batch)
            claimed_total += len(jobs)
            if len(jobs) < batch:
                return claimed_total
            # A full batch means a backlog: claim more per round trip, up to a bound, so a
            # burst drains at the store's pace rather than at CLAIM_BATCH per round trip.
            batch = min(batch * 2, MAX_CLAIM_BATCH)

    async def _claim_and_publish(self, batch: int) -> list[Job]:
        """Claim up to ``batch`` due jobs and publish their wake-ups as ONE unit.

        Leadership loss or shutdown that arrives once the claim has begun waits for the
        publish (shielded; the claim bounded by CLAIM_CALL_TIMEOUT, the publish by
        PUBLISH_TIMEOUT): cancelling in between would leave the claimed jobs queued with no
        wake-up until QUEUED_TIMEOUT. A deposed leader finishing its last claim is safe:
        claims are conditional and wake-ups idempotent. A claim that outlives its bound
        raises StoreError; whatever it claimed stays queued for the reaper.

        If the publish fails or times out, the jobs are deliberately LEFT queued for the
        reaper, which re-pends them after QUEUED_TIMEOUT: re-pending them at once would spin
        claim/publish against a bus that is down, and some wake-ups of a failed batch may
        have been delivered already.
        """
        deps = self._deps
        await trio.lowlevel.checkpoint_if_cancelled()  # not leading any more: claim nothing
        with trio.CancelScope(shield=True):
            # Due within the lead counts as due: queued_at is then the instant the job's
            # wake-up goes out (its due time), at most CLAIM_LEAD ahead of the claim.
            tracing = deps.tracing
            started = time.time_ns() if tracing.enabled else 0
            with trio.move_on_after(CLAIM_CALL_TIMEOUT) as claiming:
                due_by = deps.clock.now() + self._lead
                if self._flow is not None:
                    jobs = await self._flow.claim(due_by, batch)
                else:
                    jobs = await deps.store.claim_due(due_by, batch)
            if claiming.cancelled_caught:
                raise StoreError(f"the claim did not answer within {CLAIM_CALL_TIMEOUT:g}s")
            if jobs:
                if tracing.enabled:
                    tracing.claimed(jobs, started, time.time_ns())
                deps.metrics.scheduler_jobs_claimed.inc(len(jobs))
                self._claimed_to = due_by
                now = deps.clock.now()
                due = jobs
                if self._publishers is not None and due_by > now:
                    later = [job for job in jobs if job.scheduled_at > now]
                    if later:
                        due = [job for job in jobs if job.scheduled_at <= now]
                        self._publishers.start_soon(self._publish_later, later, due_by)
                await self._publish_bounded(due, due_by)
        return jobs

    async def _publish_later(self, jobs: list[Job], claimed_for: datetime) -> None:
        """Publish wake-ups claimed ahead at their instants, from a task of their own while
        the loop claims on; shielded like the claim they came from, so that a term that ends
        meanwhile still sends them."""
        with trio.CancelScope(shield=True):
            try:
                await self._publish_bounded(jobs, claimed_for)
            except Exception as exc:
                # As a pass's: reported, and the jobs left queued for the reaper.
                self._deps.metrics.scheduler_pass_errors.labels(kind="unexpected").inc()
                log.exception(
                    "publish failed unexpectedly; reaper will re-pend",
                    extra={"jobs": len(jobs), "error": repr(exc), "job_ids": _some_ids(jobs)},
                )

    async def _publish_bounded(self, jobs: list[Job], claimed_for: datetime) -> None:
        """:meth:`_publish_on_time`, bounded by PUBLISH_TIMEOUT: past it the jobs are left
        queued for the reaper."""
        if not jobs:
            return
        with trio.move_on_after(PUBLISH_TIMEOUT) as publishing:
            await self._publish_on_time(jobs, claimed_for)
        if publishing.cancelled_caught:
            self._deps.metrics.scheduler_dispatch_errors.inc(len(jobs))
            log.error(
                "dispatch timed out; reaper will re-pend",
                extra={"jobs": len(jobs), "timeout": PUBLISH_TIMEOUT, "job_ids": _some_ids(jobs)},
            )

    async def _report_flow(self) -> None:
        """Store what the claims held back (at most once a second, and when it changes), for
        the job pages and the Overview. A failure costs a log line; the claims go on."""
        if self._flow is None:
            return
        report = self._flow.report_due(self._deps.clock.now())
        if report is None:
            return
        with trio.move_on_after(CLAIM_CALL_TIMEOUT):
            try:
                await self._deps.store.put_flow_report(report)
            except StoreError as exc:
                log.warning("flow report not stored", extra={"error": str(exc)})

    async def _publish_on_time(self, jobs: list[Job], claimed_for: datetime) -> None:
        """Publish each claimed job's wake-up once it is due (claims run up to CLAIM_LEAD
        early), in claim order (priority first) among the jobs due together. A job queued
        for a later start than the claim's (``claimed_for``: claimed ahead under a rate
        limit) is due: its wake-up goes now and names that start."""
        clock = self._deps.clock
        waiting = jobs
        while waiting:
            now = clock.now()
            due = [job for job in waiting if job.scheduled_at <= now]
            if due:
                await self._publish(due, claimed_for)
                waiting = [job for job in waiting if job.scheduled_at > now]
            else:
                await clock.sleep_until(min(job.scheduled_at for job in waiting))

    async def _publish(self, jobs: list[Job], claimed_for: datetime) -> None:
        messages = [
            WakeUp(
                job_id=j.id,
                job_type=j.job_type,
                priority=j.priority,
                not_before=j.queued_at
                if j.queued_at is not None and j.queued_at > claimed_for
                else None,
            )
            for j in jobs
        ]
        try:
            await self._deps.bus.publish(messages)
        except BusError as exc:
            # The jobs stay queued; the reaper re-pends them after QUEUED_TIMEOUT.
            self._deps.metrics.scheduler_dispatch_errors.inc(len(jobs))
            log.error(
                "dispatch failed; reaper will re-pend",
                extra={"jobs": len(jobs), "error": str(exc), "job_ids": _some_ids(jobs)},
            )
            return
        for job in jobs:
            log.debug(
                "dispatched",
                extra={"job_id": job.id, "tenant": job.tenant_id, "job_type": job.job_type},
            )

    async def _sleep(self, progress: int, next_due: NextDue = UNREAD) -> None:
        """Sleep until the next job is due less the claim lead (at most one tick), or the
        waker fires. ``next_due`` is the next due time if the pass has read it already (None:
        no job is pending); :data:`UNREAD`, it is read here.

        A job already due (it came due, or was inserted, after the last claim's ``now``)
        means tick again at once — or, if the last tick made no progress, after a short
        pause, so that something due that cannot be taken right now is no busy loop.
        """
        deps = self._deps
        if progress:
            self._stall = STALL_PAUSE
        now = deps.clock.now()
        deadline = now + self._tick
        if next_due is UNREAD:
            next_due = await deps.store.next_due_at()
        if next_due is not None:
            claimed_to = self._claimed_to
            if claimed_to is not None and next_due > claimed_to:
                # Jobs coming due back to back: the next claim begins CLAIM_SLACK before the
                # last one's stretch ends, not as early as CLAIM_LEAD before the next job
                # (a claim each), and a job due within that stretch (it came in after the
                # claim, or the flow control held it) is claimed at once as ever.
                next_due = max(next_due - self._lead, claimed_to - timedelta(seconds=CLAIM_SLACK))
            else:
                next_due -= self._lead
        if next_due is not None and next_due < deadline:
            if next_due > now:
                deadline = next_due
            elif progress:
                return
            else:
                deadline = min(deadline, now + timedelta(seconds=self._stall))
                self._stall = min(self._stall * 2, self._tick.total_seconds())
                deadline = self._flow_deadline(now, deadline)
        if deps.waker is not None:
            await deps.waker.sleep_until(deadline)
        else:
            await deps.clock.sleep_until(deadline)

    def _flow_deadline(self, now: datetime, deadline: datetime) -> datetime:
        """``deadline``, brought forward to when the flow control can take a held job: the
        next start of a held rate, or a short poll while jobs wait for slots."""
        flow = self._flow
        if flow is None:
            return deadline
        if flow.wake_at is not None:
            deadline = min(deadline, max(flow.wake_at - self._lead, now))
        if flow.waiting_for_slots:
            self._stall = min(self._stall, SLOT_POLL)
            deadline = min(deadline, now + timedelta(seconds=SLOT_POLL))
        if flow.waiting_for_room:
            self._stall = ROOM_POLL
            deadline = min(deadline, now + timedelta(seconds=ROOM_POLL))
        if self._deps.waker is not None:
            self._deps.waker.room_wanted = flow.waiting_for_room
        return deadline


def _some_ids(jobs: list[Job]) -> list[str]:
    """The first few jobs' ids, for a log line about many."""
    return [job.id for job in jobs[:5]]


async def run_scheduler(
    deps: Deps, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """The scheduler role: campaign, and dispatch while leading."""
    scheduler = Scheduler(deps)
    gauge = deps.metrics.scheduler_is_leader
    gauge.set(0)
    presence = Presence(deps, "scheduler")  # the Overview's record (jobscheduler.roles.presence)

    def on_leadership(leading: bool) -> None:
        gauge.set(int(leading))
        presence.changed(leader=leading)

    async with trio.open_nursery() as nursery:
        await nursery.start(presence.run)
        task_status.started()
        await lead(deps.elector, scheduler.dispatch_loop, on_leadership=on_leadership)
