"""The executor role: consume wake-ups for job types, run handlers, write outcomes.

Per message: pick (queued -> claimed, fresh claim token), start (-> running), run the
handler while heartbeating, then write the outcome under a shield (completed, or a failed
attempt: pending with backoff / dlq), and only then ack the message. A stale or duplicate
message loses the pick and is acked and dropped. If a heartbeat finds the claim token gone
(the reaper took the job back), the handler is cancelled: the newer attempt owns the job.
On shutdown a running job is handed back (release) without counting an attempt.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence

import trio

from . import states
from .bus import Delivery, WakeUp
from .bus.base import DeadLetter
from .errors import BusError, StoreError, UnknownHandler
from .handlers import JobContext
from .model import Job, Status
from .runtime import Deps

log = logging.getLogger(__name__)

OUTCOME_TIMEOUT = 10.0


def dead_letter_of(job: Job) -> DeadLetter:
    return DeadLetter(
        job_id=job.id,
        job_type=job.job_type,
        tenant_id=job.tenant_id,
        attempts=job.attempts,
        last_error=job.last_error,
    )


async def publish_dead_letter(deps: Deps, job: Job) -> None:
    """Announce a dead-lettered job on ``jobs.dlq``; the store already says dlq, so a bus
    failure is logged, not raised."""
    try:
        await deps.bus.publish_dead_letter(dead_letter_of(job))
    except BusError as exc:
        log.error(
            "dead letter not published",
            extra={"job_id": job.id, "tenant": job.tenant_id, "error": str(exc)},
        )


class Executor:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._worker = deps.settings.worker_id

    async def consume(
        self, job_type: str, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Consume ``job_type``'s wake-ups, running up to EXECUTOR_CONCURRENCY at once."""
        limiter = trio.CapacityLimiter(self._deps.settings.executor_concurrency)
        async with (
            self._deps.bus.subscribe(job_type) as subscription,
            trio.open_nursery() as nursery,
        ):
            log.info("executor consuming", extra={"job_type": job_type, "worker": self._worker})
            task_status.started()
            async for delivery in subscription:
                await limiter.acquire_on_behalf_of(delivery)
                nursery.start_soon(self._process, delivery, limiter)

    async def _process(self, delivery: Delivery, limiter: trio.CapacityLimiter) -> None:
        try:
            await self.run(delivery.message)
        except StoreError as exc:
            # Outcome unknown: do not ack; redelivery or the reaper will settle the job.
            log.error(
                "store failed while running job",
                extra={"job_id": delivery.message.job_id, "error": str(exc)},
            )
            return
        finally:
            limiter.release_on_behalf_of(delivery)
        with trio.CancelScope(shield=True), trio.move_on_after(OUTCOME_TIMEOUT):
            await delivery.ack()

    async def run(self, message: WakeUp) -> str:
        """Process one wake-up; returns the result label counted in the metrics."""
        deps = self._deps
        job_type = message.job_type
        token = uuid.uuid4().hex
        picked = await deps.store.apply(
            states.pick(message.job_id, worker=self._worker, token=token, now=deps.clock.now())
        )
        if picked is None:
            return self._count_lost(job_type, "pick", message.job_id)
        running = await deps.store.apply(states.start(picked, token=token, now=deps.clock.now()))
        if running is None:
            return self._count_lost(job_type, "start", message.job_id)
        logger = logging.LoggerAdapter(
            log, {"job_id": running.id, "tenant": running.tenant_id, "job_type": running.job_type}
        )
        logger.debug("job started", extra={"attempt": running.attempts + 1})
        finished = False
        try:
            error, lost = await self._run_handler(running, token, logger)
            finished = True
        finally:
            # Cancelled (shutdown) or an unexpected error: hand the job back at once instead
            # of leaving it for the reaper. Cancellation arrives wrapped in exception groups
            # from nested nurseries, so this is a flag, not an ``except Cancelled``.
            if not finished:
                await self._release(running, token, logger)
        if lost:
            deps.metrics.executor_processed.labels(job_type=job_type, result="stale").inc()
            logger.warning("job taken back while running; handler cancelled, outcome discarded")
            return "stale"
        with trio.CancelScope(shield=True), trio.move_on_after(OUTCOME_TIMEOUT):
            return await self._write_outcome(running, token, error, logger)
        return "unknown"  # the outcome write timed out; the reaper will settle the job

    async def _release(
        self, job: Job, token: str, logger: logging.LoggerAdapter[logging.Logger]
    ) -> None:
        deps = self._deps
        with trio.CancelScope(shield=True), trio.move_on_after(OUTCOME_TIMEOUT):
            released = await deps.store.apply(
                states.release(job, token=token, now=deps.clock.now())
            )
            if released is not None:
                deps.metrics.executor_processed.labels(
                    job_type=job.job_type, result="released"
                ).inc()
                logger.info("job handed back on shutdown")

    async def _run_handler(
        self, job: Job, token: str, logger: logging.LoggerAdapter[logging.Logger]
    ) -> tuple[str | None, bool]:
        """Run the handler with a heartbeat beside it. Returns (error or None, lost)."""
        deps = self._deps
        ctx = JobContext(
            job_id=job.id,
            tenant_id=job.tenant_id,
            job_type=job.job_type,
            payload=job.payload,
            attempt=job.attempts + 1,
            max_attempts=job.max_attempts,
            logger=logger,
        )
        error: str | None = None
        lost = False
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:

            async def heartbeat() -> None:
                nonlocal lost
                while True:
                    await trio.sleep(deps.settings.heartbeat_interval)
                    try:
                        beat = await deps.store.apply(
                            states.heartbeat(job, token=token, now=deps.clock.now())
                        )
                    except StoreError as exc:
                        logger.warning("heartbeat failed", extra={"error": str(exc)})
                        continue
                    if beat is None:
                        lost = True
                        nursery.cancel_scope.cancel()
                        return

            nursery.start_soon(heartbeat)
            try:
                handler = deps.registry.get(job.job_type)
                await handler.run(ctx)
            except UnknownHandler as exc:
                error = str(exc)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            nursery.cancel_scope.cancel()
        deps.metrics.executor_handler_duration.labels(job_type=job.job_type).observe(
            time.perf_counter() - started
        )
        return error, lost

    async def _write_outcome(
        self,
        job: Job,
        token: str,
        error: str | None,
        logger: logging.LoggerAdapter[logging.Logger],
    ) -> str:
        deps = self._deps
        now = deps.clock.now()
        if error is None:
            done = await deps.store.apply(states.complete(job, token=token, now=now))
            if done is None:
                return self._count_lost(job.job_type, "complete", job.id)
            result = "completed"
            logger.debug("job completed")
        else:
            after = await deps.store.apply(states.fail(job, token=token, now=now, error=error))
            if after is None:
                return self._count_lost(job.job_type, "fail", job.id)
            if after.status is Status.DLQ:
                result = "dlq"
                logger.warning(
                    "job dead-lettered", extra={"attempts": after.attempts, "error": error}
                )
                await publish_dead_letter(deps, after)
            else:
                result = "retried"
                logger.info(
                    "job failed; will retry",
                    extra={
                        "attempts": after.attempts,
                        "error": error,
                        "retry_at": after.scheduled_at.isoformat(),
                    },
                )
                if deps.waker is not None:
                    deps.waker.notify(after.scheduled_at)
        deps.metrics.executor_processed.labels(job_type=job.job_type, result=result).inc()
        return result

    def _count_lost(self, job_type: str, transition: str, job_id: str) -> str:
        self._deps.metrics.transitions_lost.labels(transition=transition).inc()
        self._deps.metrics.executor_processed.labels(job_type=job_type, result="stale").inc()
        log.debug(
            "stale or duplicate wake-up dropped", extra={"job_id": job_id, "transition": transition}
        )
        return "stale"


async def run_executor(
    deps: Deps,
    job_types: Sequence[str],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The executor role: one consumer per job type, all in this role's nursery."""
    executor = Executor(deps)
    async with trio.open_nursery() as nursery:
        for job_type in job_types:
            await nursery.start(executor.consume, job_type)
        task_status.started()
