"""The executor's settlement: outcomes written in shared round trips, messages settled.

Part of the executor role (:mod:`jobscheduler.roles.executor.consume`, whose logger it logs under):
a consumer's finished handlers are queued to its settling task, which writes their outcomes
in one ``apply_many_lean`` (retrying a failing store for OUTCOME_RETRY_FOR), then acks the
messages -- or releases them when the outcomes could not be written -- and hands dead
letters to a task of their own. :class:`~.slots.Slots` bounds what a consumer holds meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from jobscheduler._scopes import shielded, take_ready
from jobscheduler.bus import Delivery
from jobscheduler.bus.dead_letters import publish_dead_letter
from jobscheduler.domain import states
from jobscheduler.domain.attempts import Failure, Outcome
from jobscheduler.domain.model import Job, Status, format_time, utc
from jobscheduler.errors import JobNotFound, StoreError
from jobscheduler.observability.logthrottle import LogThrottle
from jobscheduler.observability.tracing import AttemptSpan
from jobscheduler.roles.deps import Deps

from .children import Children
from .slots import Slots
from .steps import StepEnds

log = logging.getLogger("jobscheduler.roles.executor.consume")

OUTCOME_TIMEOUT = 10.0
#: The ``retry_at`` of a dead-letter line: the job does not run again by itself.
NO_RETRY = "never"
#: How long a failing outcome write is retried before its messages are released.
OUTCOME_RETRY_FOR = 30.0
#: Waits between outcome-write retries, and after a failed pick before receiving more.
RETRY_DELAY_FIRST = 0.2
RETRY_DELAY_MAX = 5.0


class Done:
    """A handler has returned: the outcome to write for its job (its result, or why the
    attempt failed, and how: ``failed`` or ``timed_out``), and its span if traced."""

    __slots__ = ("failure", "job", "logger", "outcome", "permanent", "result", "span", "token")

    def __init__(
        self,
        job: Job,
        token: str,
        failure: Failure | None,
        logger: logging.LoggerAdapter[logging.Logger],
        *,
        result: Any = None,
        outcome: Outcome = Outcome.FAILED,
        permanent: bool = False,
        span: AttemptSpan | None = None,
    ) -> None:
        self.job, self.token, self.failure, self.logger = job, token, failure, logger
        self.result, self.outcome, self.permanent, self.span = result, outcome, permanent, span

    @property
    def error(self) -> str | None:
        return None if self.failure is None else self.failure.summary()


class Finished:
    """A message whose handling is over: its outcome (None: nothing to write) to settle."""

    __slots__ = ("delivery", "done")

    def __init__(self, delivery: Delivery, done: Done | None) -> None:
        self.delivery = delivery
        self.done = done


class Settlement:
    """The executor's outcome writing and message settlement (a base of ``Executor``)."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._counters: dict[tuple[str, str], Any] = {}
        self._histograms: dict[str, Any] = {}
        #: Repeated store errors become one line per interval (with a count).
        self._throttled = LogThrottle(log)
        #: Stores the jobs handlers enqueue (``ctx.enqueue``) and spawn (``ctx.spawn``).
        self.children = Children(deps)
        #: Settles the workflow steps whose end is written here (its task: run_executor's).
        self.step_ends = StepEnds(deps, self.children)

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

    async def _finish_cancel(
        self, job: Job, token: str, logger: logging.LoggerAdapter[logging.Logger]
    ) -> bool:
        """running -> cancelled (token-fenced, shielded); False if the job moved on."""
        deps = self._deps
        with shielded(OUTCOME_TIMEOUT):
            cancelled = await deps.store.apply(
                states.finish_cancel(job, token=token, now=deps.clock.now())
            )
            if cancelled is not None:
                self.step_ends.ended(cancelled)
                self._count(job.job_type, "cancelled")
                logger.info("job cancelled while running; handler stopped")
                return True
        return False

    # -- settle -----------------------------------------------------------------------------

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
            else:
                # Not handed back because a cancel was requested meanwhile: finish it.
                await self._finish_cancel(job, token, logger)

    async def _settle_loop(
        self,
        to_settle: trio.MemoryReceiveChannel[Finished],
        slots: Slots,
        dead_letters: trio.MemorySendChannel[Job],
    ) -> None:
        """Write the outcomes of finished handlers in batches, then settle their messages."""
        batch: list[Finished] = []
        async with dead_letters:
            try:
                async for first in to_settle:
                    batch = [first, *take_ready(to_settle)]
                    await self._settle(batch, slots, dead_letters)
                    batch = []
            finally:
                # Cancelled outright (not drained): settle what already finished, so a
                # completed handler is not run again after the reaper's timeout.
                rest = [*batch, *take_ready(to_settle)]
                if rest:
                    await self._settle(rest, slots, dead_letters)

    async def _settle(
        self,
        batch: list[Finished],
        slots: Slots,
        dead_letters: trio.MemorySendChannel[Job],
    ) -> None:
        """Write the batch's outcomes (retrying), then ack its messages -- or release them
        if the outcomes could not be written -- and queue its dead letters."""
        done = [item.done for item in batch if item.done is not None]
        dead: list[Job] = []
        written = False
        try:
            written = not done or await self._write_outcomes_retrying(done, dead)
        finally:
            # Whatever happened, every message is settled and its slot freed.
            with trio.CancelScope(shield=True):
                for item in batch:
                    if written or item.done is None:  # None: stale, nothing to write
                        await item.delivery.ack()
                    else:
                        await item.delivery.release()
            # All slots at once, so the receive loop sees them together (one pick batch).
            for item in batch:
                slots.settled(item.delivery)
        for job in dead:
            try:
                dead_letters.send_nowait(job)
            except (trio.WouldBlock, trio.ClosedResourceError):
                self._throttled.log(
                    logging.ERROR,
                    "dead letter dropped: too many waiting for the bus",
                    key="dead letters dropped",
                    extra={"job_id": job.id, "tenant": job.tenant_id},
                )

    async def _write_outcomes_retrying(self, outcomes: Sequence[Done], dead: list[Job]) -> bool:
        """Write the outcomes, retrying a failing or hanging store for OUTCOME_RETRY_FOR;
        False if they could not be written. Each attempt is shielded and bounded; a
        cancellation (shutdown) between attempts ends the retries.

        A retry is safe: every outcome is conditional on the job's claim token. Every try
        writes the same changes, so an outcome that landed although its try failed (a
        timeout, a lost reply) is recognised on the next by reading the job back
        (:meth:`~jobscheduler.domain.states.Change.landed_on`), and ends as written: its
        dead letter is announced, its retry time given to the waker.
        """
        changes = self._outcome_changes(outcomes)
        give_up_at = trio.current_time() + OUTCOME_RETRY_FOR
        delay = RETRY_DELAY_FIRST
        retry = False
        while True:
            error = f"timed out after {OUTCOME_TIMEOUT:.0f}s"
            with shielded(OUTCOME_TIMEOUT):
                try:
                    await self._write_outcomes(outcomes, dead, changes, retry=retry)
                except StoreError as exc:
                    error = str(exc)
                else:
                    self._throttled.recovered("outcome", "store writes outcomes again")
                    return True
            self._throttled.log(
                logging.ERROR,
                "store failed while writing outcomes; retrying",
                key="outcome",
                extra={"jobs": len(outcomes), "error": error},
            )
            if trio.current_time() + delay > give_up_at:
                break
            await trio.sleep(delay)
            delay = min(delay * 2, RETRY_DELAY_MAX)
            retry = True
        for outcome in outcomes:
            outcome.logger.error(
                "outcome not written; message released, the reaper will recover the job",
                extra={"error": error, "retried_for": OUTCOME_RETRY_FOR},
            )
        return False

    async def _dead_letter_loop(self, dead_letters: trio.MemoryReceiveChannel[Job]) -> None:
        """Announce dead-lettered jobs on the bus, each publish bounded (see dead_letters)."""
        async with dead_letters:
            async for job in dead_letters:
                await publish_dead_letter(self._deps.bus, job)

    def _outcome_changes(self, outcomes: Sequence[Done]) -> list[states.Change]:
        """The transition that writes each outcome (one instant for the whole batch)."""
        now = utc(self._deps.clock.now())
        return [
            states.complete(o.job, token=o.token, now=now, result=o.result)
            if o.failure is None
            else states.fail(
                o.job,
                token=o.token,
                now=now,
                error=o.failure,
                outcome=o.outcome,
                permanent=o.permanent,
            )
            for o in outcomes
        ]

    async def _write_outcomes(
        self,
        outcomes: Sequence[Done],
        dead: list[Job],
        changes: Sequence[states.Change] | None = None,
        *,
        retry: bool = False,
    ) -> list[str]:
        """Write each handler's outcome (one round trip; ``changes`` made by
        :meth:`_outcome_changes`, which this makes when not given); returns the result
        labels and appends the dead-lettered jobs to ``dead`` (their dead letters are the
        caller's). A ``retry`` reads back each job whose change did not apply, in case an
        earlier try of the same change landed."""
        deps = self._deps
        if changes is None:
            changes = self._outcome_changes(outcomes)
        # A completion's row is not read back (only whether it applied); a failure's is.
        read_back = [o.failure is not None for o in outcomes]
        started = time.time_ns() if deps.tracing.enabled else 0
        written = await deps.store.apply_many_lean(changes, read_back)
        if retry:
            for i, after in enumerate(written):
                if after is False:
                    written[i] = await self._landed(changes[i], read_back[i])
        freed = any(
            after is not False and (o.job.key_slot or o.job.type_slot)
            for o, after in zip(outcomes, written, strict=True)
        )
        if freed and deps.waker is not None:
            # A slot is free: a job held back for it may be claimed now, not a tick later.
            deps.waker.notify(deps.clock.now())
        results: list[str] = []
        for i, (outcome, after) in enumerate(zip(outcomes, written, strict=True)):
            job, error, logger = outcome.job, outcome.error, outcome.logger
            if after is False:
                # A failed attempt loses to a cancel request: the job ends cancelled.
                if error is not None and await self._finish_cancel(job, outcome.token, logger):
                    results.append("cancelled")
                    continue
                transition = "complete" if error is None else "fail"
                results.append(self._count_lost(job.job_type, transition, job.id))
                continue
            if error is None:
                result = "completed"
                self.step_ends.ended(attrs.evolve(job, **changes[i].set))
                logger.debug("job completed")
                self._count(job.job_type, result)
                results.append(result)
                continue
            assert isinstance(after, Job)  # a failure's row is read back
            assert outcome.failure is not None
            # Each line says what failed and when (or whether) the job runs again.
            explained = {
                "attempts": after.attempts,
                "max_attempts": after.max_attempts,
                "error_type": outcome.failure.type,
                "error_message": outcome.failure.message,
            }
            if after.status is Status.DLQ:
                self.step_ends.ended(after)
                result = "dlq"
                logger.warning(
                    "job dead-lettered",
                    extra={**explained, "retry_at": NO_RETRY, "permanent": outcome.permanent},
                )
                dead.append(after)
            else:
                result = "retried"
                logger.info(
                    "job failed; will retry",
                    extra={**explained, "retry_at": format_time(after.scheduled_at)},
                )
                if deps.waker is not None:
                    deps.waker.notify(after.scheduled_at)
            self._count(job.job_type, result)
            results.append(result)
        if deps.tracing.enabled:
            spans = [(o.span, o.job, r) for o, r in zip(outcomes, results, strict=True)]
            deps.tracing.outcomes(spans, started, time.time_ns())
        return results

    async def _landed(self, change: states.Change, want: bool) -> Job | bool:
        """What an earlier try of ``change`` wrote, if it landed (the job when ``want``,
        else True); False when the job holds something else."""
        try:
            job = await self._deps.store.get(change.job_id)
        except JobNotFound:
            return False
        if not change.landed_on(job):
            return False
        # Its attempt record and events may not have landed with it (MongoDB writes them after).
        if change.record is not None:
            await self._deps.store.record_attempts([change.record])
        if change.events:
            await self._deps.store.record_events(change.events)
        log.info(
            "outcome found written by an earlier try",
            extra={"job_id": job.id, "tenant": job.tenant_id, "transition": change.transition},
        )
        return job if want else True

    def _count_lost(self, job_type: str, transition: str, job_id: str) -> str:
        self._deps.metrics.transitions_lost.labels(transition=transition).inc()
        self._count(job_type, "stale")
        log.debug(
            "stale or duplicate wake-up dropped", extra={"job_id": job_id, "transition": transition}
        )
        return "stale"
