"""How the scheduler fires one cron template: plan the pass, decide each fire time (overlap
policy), record the decisions in the ledger, act on the ledger's answer, move the template.

The ledger record of a fire time is written *before* anything is spawned, and the scheduler
acts on the record the store answers with, not on its own decision: when two schedulers
briefly both lead and decide one fire time differently (one saw the previous run still
running, the other saw it finish), the first record wins and both act on it. A spawned
record carries the run's id, so the run is inserted with that id (keyed on its fire time, as
before: a repeated spawn is a no-op) and the ledger names the run exactly.

Overlap (``skip``/``buffer_one``/``cancel_previous``) asks whether the template's previous
run has finished: the run of its newest spawned or buffered ledger record. Under these
policies a template has at most one unfinished run, so that one run is the only one to look
at. Under ``cancel_previous`` the spawned record names that run (``cancelled_run_id``) when
it had not finished, and whichever scheduler acts on the record cancels it before spawning
the new run, through the same transitions as a user's cancel (pending/queued/claimed ->
cancelled; running -> a cancel request the executor honours within a heartbeat).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import attrs

from jobscheduler.domain import cron, states
from jobscheduler.domain.cron import Occurrence, OccurrenceStatus, Overlap, SkipReason
from jobscheduler.domain.model import Job, Status, cron_policy_of, utc
from jobscheduler.domain.model import new_job_id as new_run_id
from jobscheduler.errors import DuplicateJob, JobNotFound, ValidationError
from jobscheduler.roles.deps import Deps
from jobscheduler.store.jobs import OccurrenceQuery

log = logging.getLogger(__name__)

#: Ledger statuses that name a run.
RUN_STATUSES = (OccurrenceStatus.SPAWNED, OccurrenceStatus.BUFFERED)
#: Templates holding a buffered fire time looked at per pass.
BUFFER_BATCH = 100
#: Fresh reads of the previous run before ``cancel_previous`` gives up on a moving target.
CANCEL_TRIES = 3


class TemplateFiring:
    """The cron part of the scheduler's pass (stateless between calls)."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def fire(self, template: Job) -> bool:
        """Spawn what the template's due fire times call for, record each fire time in the
        ledger, then move the template (conditional on the version read). True when the
        template is no longer due (moved, or dead-lettered for an invalid expression);
        False when it did not move (a lost race or a stale snapshot: a fresh read redoes
        it)."""
        deps = self._deps
        now = deps.clock.now()
        fields = {"job_id": template.id, "tenant": template.tenant_id}
        assert template.cron is not None
        policy = cron_policy_of(template)
        try:
            plan = cron.plan_pass(template.cron, policy, template.scheduled_at, now)
        except ValidationError as exc:
            dead = await deps.store.apply(
                states.dead_letter_template(template, error=str(exc), now=now)
            )
            if dead is not None:
                deps.metrics.scheduler_invalid_cron.inc()
                log.error("cron template dead-lettered", extra={**fields, "error": str(exc)})
            return dead is not None
        if plan.skipped:
            log.info(
                "cron fire times skipped",
                extra={
                    **fields,
                    "skipped": plan.skipped,
                    "at_least": plan.skipped_capped,
                    "reason": plan.skip_reason,
                    "catch_up": policy.catch_up.value,
                },
            )
        decided = await self._decide(template, policy.overlap, plan.spawn, now)
        skips = [_skipped(template, at, reason, now) for at, reason in plan.skips]
        records = sorted([*decided, *skips], key=lambda r: r.fire_at)
        stored = await deps.store.record_occurrences(records)
        buffered: datetime | None = None
        for record, written in stored:
            if record.status is OccurrenceStatus.SPAWNED:
                if record.cancelled_run_id is not None:
                    await self._cancel_previous(template, record, now)
                await self._spawn(template, record, now)
            elif record.status is OccurrenceStatus.BUFFERED:
                buffered = record.fire_at
                log.info(
                    "cron fire time buffered",
                    extra={**fields, "fire_at": record.fire_at.isoformat()},
                )
            elif written:
                self._count_skip(template, record)
        if buffered is not None and template.cron_buffered != buffered:
            if template.cron_buffered is not None:
                # Another scheduler held this fire time after releasing the one this
                # snapshot shows: the snapshot is stale; the next pass redoes it.
                log.debug("template snapshot is stale; not advanced", extra=fields)
                return False
            change = states.advance_template_holding(
                template, next_at=plan.next_at, buffered=buffered, now=now
            )
        else:
            change = states.advance_template(template, next_at=plan.next_at, now=now)
        if await deps.store.apply(change) is None:
            deps.metrics.transitions_lost.labels(transition="advance_template").inc()
            log.debug("template already advanced or changed", extra=fields)
            return False
        return True

    async def release_buffers(self) -> int:
        """Spawn the buffered fire time of every template whose previous run has finished;
        returns how many were spawned."""
        deps = self._deps
        released = 0
        for template in await deps.store.buffered_templates(BUFFER_BATCH):
            held = template.cron_buffered
            assert held is not None
            query = OccurrenceQuery(template.id, before=_after(held), statuses=RUN_STATUSES)
            records = await deps.store.occurrences(query, limit=2)
            mine = next((r for r in records if r.fire_at == held), None)
            previous = next((r for r in records if r.fire_at < held), None)
            if previous is not None and await self._unfinished(previous):
                continue
            now = deps.clock.now()
            if mine is not None and mine.run_id is not None:
                await self._spawn(template, mine, now)
                released += 1
            else:  # its record was pruned: nothing names a run to spawn
                log.warning(
                    "buffered fire time has no ledger record; dropped",
                    extra={
                        "job_id": template.id,
                        "tenant": template.tenant_id,
                        "fire_at": held.isoformat(),
                    },
                )
            if await deps.store.apply(states.release_buffered(template, now=now)) is None:
                deps.metrics.transitions_lost.labels(transition="release_buffered").inc()
        return released

    async def _decide(
        self, template: Job, overlap: Overlap, due: tuple[datetime, ...], now: datetime
    ) -> list[Occurrence]:
        """One record per due fire time: spawned, or (overlap) buffered or skipped."""
        if not due:
            return []
        if overlap is Overlap.ALLOW:
            return [_run(template, at, OccurrenceStatus.SPAWNED, now) for at in due]
        if overlap is Overlap.CANCEL_PREVIOUS:
            # The newest due fire time replaces the previous run; older ones due in this
            # same pass would be cancelled by it before they ran, so they get no run.
            *replaced, newest = due
            previous = await self._unfinished_run(template)
            superseded = [_skipped(template, at, SkipReason.OVERLAP, now) for at in replaced]
            run = _run(template, newest, OccurrenceStatus.SPAWNED, now)
            return [*superseded, attrs.evolve(run, cancelled_run_id=previous)]
        busy = await self._busy(template)
        holding = template.cron_buffered is not None
        out: list[Occurrence] = []
        for at in due:
            if not busy:
                out.append(_run(template, at, OccurrenceStatus.SPAWNED, now))
                busy = True
            elif overlap is Overlap.BUFFER_ONE and not holding:
                out.append(_run(template, at, OccurrenceStatus.BUFFERED, now))
                holding = True
            else:
                out.append(_skipped(template, at, SkipReason.OVERLAP, now))
        return out

    async def _busy(self, template: Job) -> bool:
        """Whether the template's previous run has not finished (or a fire time is held)."""
        if template.cron_buffered is not None:
            return True
        latest = await self._deps.store.occurrences(_runs_of(template), limit=1)
        return bool(latest) and await self._unfinished(latest[0])

    async def _unfinished_run(self, template: Job) -> str | None:
        """The id of the template's previous run if it has not finished, else None."""
        latest = await self._deps.store.occurrences(_runs_of(template), limit=1)
        if latest and await self._unfinished(latest[0]):
            return latest[0].run_id
        return None

    async def _cancel_previous(self, template: Job, record: Occurrence, now: datetime) -> None:
        """Cancel the run the record names (``overlap="cancel_previous"``): at once if no
        executor runs it yet, by a cancel request if one does. A run that finished (or was
        cancelled, or asked to stop, by another scheduler acting on the same record) is left
        alone; a lost race re-reads the run."""
        deps = self._deps
        run_id = record.cancelled_run_id
        assert run_id is not None
        fields = {
            "job_id": template.id,
            "tenant": template.tenant_id,
            "run_id": run_id,
            "fire_at": record.fire_at.isoformat(),
        }
        for _ in range(CANCEL_TRIES):
            try:
                run = await deps.store.get(run_id)
            except JobNotFound:
                return
            if run.status in states.CANCELLABLE:
                change = states.cancel(run, now=now)
            elif run.status is Status.RUNNING and run.cancel_requested_at is None:
                change = states.request_cancel(run, now=now)
            else:  # finished, or already asked to stop
                return
            if await deps.store.apply(change) is not None:
                deps.metrics.scheduler_cron_cancelled_previous.inc()
                log.info(
                    "previous cron run cancelled",
                    extra={**fields, "transition": change.transition},
                )
                return
            deps.metrics.transitions_lost.labels(transition=change.transition).inc()
        log.warning("previous cron run kept changing; not cancelled", extra=fields)

    async def _unfinished(self, record: Occurrence) -> bool:
        if record.run_id is None:
            return False
        try:
            run = await self._deps.store.get(record.run_id)
        except JobNotFound:
            # A buffered record's run not spawned yet is still to come; a spawned record's
            # run that is gone (deleted) is finished.
            return record.status is OccurrenceStatus.BUFFERED
        return run.status in states.UNFINISHED

    async def _spawn(self, template: Job, record: Occurrence, now: datetime) -> None:
        """Insert the run of one fire time with the ledger's run id (a no-op if it was
        already spawned); with tracing on, the run starts a trace of its own (``cron.fire``)."""
        deps = self._deps
        fields = {"job_id": template.id, "tenant": template.tenant_id}
        policy = cron_policy_of(template)
        fire_at = record.fire_at
        run_at = fire_at + cron.jitter_offset(template.id, fire_at, policy.jitter)
        instance = states.spawn_instance(template, fire_at=fire_at, now=now, run_at=run_at)
        if record.run_id is not None:
            instance = attrs.evolve(instance, id=record.run_id)
        stored: Job | None
        if deps.tracing.enabled:
            with deps.tracing.cron_fire(template, fire_at) as fire:
                instance = attrs.evolve(instance, trace_parent=fire.traceparent)
                stored = await self._insert(template, instance, fields)
                if stored is None:
                    fire.already_spawned()
        else:
            stored = await self._insert(template, instance, fields)
        if stored is None:
            return
        lag = max((now - fire_at).total_seconds(), 0.0)
        deps.metrics.scheduler_cron_spawned.inc()
        deps.metrics.scheduler_cron_lag.observe(lag)
        log.info(
            "cron instance spawned",
            extra={
                **fields,
                "instance_id": stored.id,
                "key": stored.idempotency_key,
                "fire_at": fire_at.isoformat(),
                "run_at": stored.scheduled_at.isoformat(),
                "lag_s": round(lag, 3),
            },
        )

    async def _insert(self, template: Job, instance: Job, fields: dict[str, str]) -> Job | None:
        """Insert a run; the run as stored, or None if this fire time's run already was."""
        deps = self._deps
        try:
            return await deps.store.insert(instance)
        except DuplicateJob:
            # "Already spawned" only if the store holds this template's run of this fire time
            # (the run identity is (template_id, fire_at), not the key): otherwise another
            # job of the tenant holds the run's key, and the run is spawned anyway under a
            # key of its own, so no client-chosen key can stop a template from firing.
            assert instance.fire_at is not None
            if await deps.store.find_run(template.id, instance.fire_at) is not None:
                log.debug(
                    "cron instance already spawned",
                    extra={**fields, "key": instance.idempotency_key},
                )
                return None
            log.warning(
                "cron run key held by another job; spawning the run under its own key",
                extra={
                    **fields,
                    "key": instance.idempotency_key,
                    "fire_at": instance.fire_at.isoformat(),
                },
            )
            instance = attrs.evolve(
                instance, idempotency_key=f"{instance.idempotency_key}-{instance.id}"
            )
            try:
                return await deps.store.insert(instance)
            except DuplicateJob:  # another leader spawned this run meanwhile
                log.debug("cron instance already spawned", extra=fields)
                return None

    def _count_skip(self, template: Job, record: Occurrence) -> None:
        reason = record.reason.value if record.reason else "unknown"
        self._deps.metrics.scheduler_cron_skipped.labels(reason=reason).inc()
        extra: dict[str, Any] = {
            "job_id": template.id,
            "tenant": template.tenant_id,
            "fire_at": record.fire_at.isoformat(),
            "reason": reason,
        }
        log.debug("cron fire time skipped", extra=extra)


async def record_paused(deps: Deps, template: Job, *, until: datetime) -> int:
    """Record the fire times a template passed over while paused: from its fire time when
    it was paused (``template.scheduled_at``) up to, not including, ``until`` (where it
    resumes), at most :data:`cron.SKIP_COUNT_LIMIT`; returns how many were new."""
    if template.cron is None or template.scheduled_at >= until:
        return 0
    policy = cron_policy_of(template)
    now = deps.clock.now()
    missed: list[Occurrence] = []
    start = template.scheduled_at - timedelta(microseconds=1)
    for fire in policy.fires(template.cron, start):
        if fire.at >= until or len(missed) >= cron.SKIP_COUNT_LIMIT:
            break
        missed.append(_skipped(template, fire.at, SkipReason.PAUSED, now))
    stored = await deps.store.record_occurrences(missed)
    new = [record for record, written in stored if written]
    if new:
        deps.metrics.scheduler_cron_skipped.labels(reason=SkipReason.PAUSED.value).inc(len(new))
        log.info(
            "cron fire times skipped while paused",
            extra={"job_id": template.id, "tenant": template.tenant_id, "skipped": len(new)},
        )
    return len(new)


def _runs_of(template: Job) -> OccurrenceQuery:
    """The template's ledger records that name a run (spawned or buffered)."""
    return OccurrenceQuery(template.id, statuses=RUN_STATUSES)


def _after(at: datetime) -> datetime:
    """Just after ``at`` at the ledger's precision (milliseconds)."""
    return utc(at) + timedelta(milliseconds=1)


def _run(template: Job, at: datetime, status: OccurrenceStatus, now: datetime) -> Occurrence:
    return Occurrence(
        template_id=template.id,
        tenant_id=template.tenant_id,
        fire_at=utc(at),
        status=status,
        recorded_at=utc(now),
        run_id=new_run_id(),
    )


def _skipped(template: Job, at: datetime, reason: SkipReason, now: datetime) -> Occurrence:
    return Occurrence(
        template_id=template.id,
        tenant_id=template.tenant_id,
        fire_at=utc(at),
        status=OccurrenceStatus.SKIPPED,
        recorded_at=utc(now),
        reason=reason,
    )
