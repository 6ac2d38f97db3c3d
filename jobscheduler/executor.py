"""The executor role: consume wake-ups for job types, run handlers, write outcomes.

Per message: pick (queued -> claimed, fresh claim token), start (-> running), run the
handler while heartbeating, then write the outcome under a shield (completed, or a failed
attempt: pending with backoff / dlq), and only then ack the message. A stale or duplicate
message loses the pick and is acked and dropped. If a heartbeat finds the claim token gone
(the reaper took the job back), the handler is cancelled: the newer attempt owns the job.
On shutdown a running job is handed back (release) without counting an attempt.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

import trio

from . import states
from ._scopes import shielded
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


class _InFlight:
    """A running job, as the executor's shared heartbeat loop sees it."""

    __slots__ = ("job_id", "lost", "scope", "token")

    def __init__(self, job_id: str, token: str) -> None:
        self.job_id = job_id
        self.token = token
        self.scope = trio.CancelScope()
        self.lost = False


class Executor:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._worker = deps.settings.worker_id
        self._in_flight: dict[str, _InFlight] = {}
        # Per consumer: the scope of its receive loop and the scope of its handlers.
        self._consumers: list[tuple[trio.CancelScope, trio.CancelScope]] = []
        # Claim tokens: unique per process (random prefix) and per claim (counter); cheaper
        # than a uuid4 per job and just as unguessable across processes.
        self._token_prefix = secrets.token_hex(8)
        self._token_seq = itertools.count()
        self._counters: dict[tuple[str, str], Any] = {}
        self._histograms: dict[str, Any] = {}

    def _count(self, job_type: str, result: str) -> None:
        """Count one processed message (label children cached: this is the hot path)."""
        key = (job_type, result)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._deps.metrics.executor_processed.labels(job_type=job_type, result=result)
            self._counters[key] = counter
        counter.inc()

    def _duration(self, job_type: str) -> Any:
        histogram = self._histograms.get(job_type)
        if histogram is None:
            histogram = self._deps.metrics.executor_handler_duration.labels(job_type=job_type)
            self._histograms[job_type] = histogram
        return histogram

    def _new_token(self) -> str:
        return f"{self._token_prefix}-{next(self._token_seq)}"

    async def heartbeat_loop(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Every HEARTBEAT_INTERVAL, refresh every running job in one batch. A job whose
        token no longer matches was taken back by the reaper: cancel its handler."""
        deps = self._deps
        task_status.started()
        while True:
            await trio.sleep(deps.settings.heartbeat_interval)
            entries = list(self._in_flight.values())
            if not entries:
                continue
            now = deps.clock.now()
            try:
                results = await deps.store.apply_many(
                    [states.heartbeat(e.job_id, token=e.token, now=now) for e in entries]
                )
            except StoreError as exc:
                log.warning("heartbeat failed", extra={"jobs": len(entries), "error": str(exc)})
                continue
            for entry, beat in zip(entries, results, strict=True):
                if beat is None and entry.token in self._in_flight:
                    entry.lost = True
                    entry.scope.cancel()

    async def consume(
        self, job_type: str, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Consume ``job_type``'s wake-ups, running up to EXECUTOR_CONCURRENCY at once."""
        limiter = trio.CapacityLimiter(self._deps.settings.executor_concurrency)
        receiving = trio.CancelScope()
        async with (
            self._deps.bus.subscribe(job_type) as subscription,
            trio.open_nursery() as handlers,
        ):
            self._consumers.append((receiving, handlers.cancel_scope))
            log.info("executor consuming", extra={"job_type": job_type, "worker": self._worker})
            task_status.started()
            with receiving:
                async for delivery in subscription:
                    await limiter.acquire_on_behalf_of(delivery)
                    handlers.start_soon(self._process, delivery, limiter)
            # Draining: no new messages; running handlers finish (or are cancelled at the
            # grace deadline and hand their jobs back) before the subscription closes.

    def drain(self, grace: float) -> None:
        """Stop receiving; give running handlers ``grace`` seconds, then cancel them."""
        deadline = trio.current_time() + grace
        log.info("executor draining", extra={"running": len(self._in_flight), "grace": grace})
        for receiving, handlers in self._consumers:
            receiving.cancel()
            handlers.deadline = min(handlers.deadline, deadline)

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
        with shielded(OUTCOME_TIMEOUT):
            await delivery.ack()

    async def run(self, message: WakeUp) -> str:
        """Process one wake-up; returns the result label counted in the metrics."""
        deps = self._deps
        job_type = message.job_type
        token = self._new_token()
        now = deps.clock.now()
        # queued -> claimed -> running: two transitions, sent in one round trip.
        picked, running = await deps.store.apply_many(
            [
                states.pick(message.job_id, worker=self._worker, token=token, now=now),
                states.start(message.job_id, token=token, now=now),
            ]
        )
        if picked is None:
            return self._count_lost(job_type, "pick", message.job_id)
        if running is None:
            return self._count_lost(job_type, "start", message.job_id)
        logger = logging.LoggerAdapter(
            log, {"job_id": running.id, "tenant": running.tenant_id, "job_type": running.job_type}
        )
        entry = _InFlight(running.id, token)
        self._in_flight[token] = entry
        finished = False
        started = time.perf_counter()
        try:
            error = await self._run_handler(running, entry, logger)
            finished = True
        finally:
            del self._in_flight[token]
            # Cancelled (shutdown) or an unexpected error: hand the job back at once instead
            # of leaving it for the reaper. Cancellation arrives wrapped in exception groups
            # from nested nurseries, so this is a flag, not an ``except Cancelled``.
            if not finished:
                await self._release(running, token, logger)
        self._duration(job_type).observe(time.perf_counter() - started)
        if entry.lost:
            self._count(job_type, "stale")
            logger.warning("job taken back while running; handler cancelled, outcome discarded")
            return "stale"
        with shielded(OUTCOME_TIMEOUT):
            return await self._write_outcome(running, token, error, logger)
        return "unknown"  # the outcome write timed out; the reaper will settle the job

    async def _run_handler(
        self, job: Job, entry: _InFlight, logger: logging.LoggerAdapter[logging.Logger]
    ) -> str | None:
        """Run the handler inside the entry's cancel scope; returns the error, if any."""
        ctx = JobContext(
            job_id=job.id,
            tenant_id=job.tenant_id,
            job_type=job.job_type,
            payload=job.payload,
            attempt=job.attempts + 1,
            max_attempts=job.max_attempts,
            logger=logger,
        )
        with entry.scope:
            try:
                await self._deps.registry.get(job.job_type).run(ctx)
            except UnknownHandler as exc:
                return str(exc)
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return None

    async def _release(
        self, job: Job, token: str, logger: logging.LoggerAdapter[logging.Logger]
    ) -> None:
        deps = self._deps
        with shielded(OUTCOME_TIMEOUT):
            released = await deps.store.apply(
                states.release(job, token=token, now=deps.clock.now())
            )
            if released is not None:
                self._count(job.job_type, "released")
                logger.info("job handed back on shutdown")

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
        self._count(job.job_type, result)
        return result

    def _count_lost(self, job_type: str, transition: str, job_id: str) -> str:
        self._deps.metrics.transitions_lost.labels(transition=transition).inc()
        self._count(job_type, "stale")
        log.debug(
            "stale or duplicate wake-up dropped", extra={"job_id": job_id, "transition": transition}
        )
        return "stale"


async def run_executor(
    deps: Deps,
    job_types: Sequence[str],
    drain: trio.Event | None = None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The executor role: one consumer per job type, all in this role's nursery.

    When ``drain`` is set, stop receiving and return once running handlers have finished,
    or SHUTDOWN_GRACE later (cancelled handlers hand their jobs back).
    """
    executor = Executor(deps)
    async with trio.open_nursery() as nursery:
        await nursery.start(executor.heartbeat_loop)
        async with trio.open_nursery() as consumers:
            for job_type in job_types:
                await consumers.start(executor.consume, job_type)
            task_status.started()
            if drain is not None:
                await drain.wait()
                executor.drain(deps.settings.shutdown_grace)
        nursery.cancel_scope.cancel()
