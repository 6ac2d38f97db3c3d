"""The executor role: consume wake-ups for job types, run handlers, write outcomes.

Per message: pick (queued -> claimed, fresh claim token), start (-> running), run the
handler while heartbeating, then write the outcome under a shield (completed, or a failed
attempt: pending with backoff / dlq), and only then ack the message. A stale or duplicate
message loses the pick and is acked and dropped. If a heartbeat finds the claim token gone
(the reaper took the job back), the handler is cancelled: the newer attempt owns the job.
On shutdown a running job is handed back (release) without counting an attempt.

Every message is settled: acked once its outcome is written (or its job turned out not
to be ours), released when the store failed or timed out so the outcome is unknown -- the
store is the truth, and the reaper recovers what a failed pick or outcome left behind. An
outcome write is retried for OUTCOME_RETRY_FOR before it is given up (the handler already
ran; losing its outcome costs a re-run). Dead letters are announced after the outcomes are
written and their messages settled, by a task of their own, bounded, so a slow bus never
holds settlement up.

Round trips are shared, never transitions: the messages already waiting when one arrives
are picked in one ``apply_many``, and outcomes that finish together are written in one by a
settling task, which acks their messages afterwards. Each job still gets its own
conditional updates, so the batching changes the cost, not the semantics. Outcomes and
settlement live in :mod:`jobscheduler.roles.executor.settle`.
"""

from __future__ import annotations

import itertools
import logging
import math
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import attrs
import trio

from jobscheduler._scopes import shielded
from jobscheduler.bus import Delivery, Subscription, WakeUp
from jobscheduler.bus.dead_letters import publish_dead_letter
from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Job, utc
from jobscheduler.errors import StoreError
from jobscheduler.handlers.runners import HandlerRunner
from jobscheduler.observability.logs import FieldsAdapter
from jobscheduler.roles.deps import Deps

from .held import Holding
from .run import InFlight, run_attempt
from .settle import OUTCOME_RETRY_FOR as OUTCOME_RETRY_FOR
from .settle import OUTCOME_TIMEOUT as OUTCOME_TIMEOUT
from .settle import RETRY_DELAY_FIRST, Done, Finished, Settlement
from .slots import Slots

log = logging.getLogger(__name__)

#: Dead letters waiting for the bus; beyond this they are dropped (the store says dlq).
DEAD_LETTERS_QUEUED = 1000


class Executor(Settlement):
    """The executor role's consumers, handlers and heartbeats (outcomes: :class:`Settlement`)."""

    def __init__(self, deps: Deps, runner: HandlerRunner | None = None) -> None:
        super().__init__(deps)
        # Where handlers run (trio / worker process / thread); see handlers.runners.
        self._runner = runner or HandlerRunner(now=deps.clock.now)
        self._worker = deps.settings.worker_id
        self._in_flight: dict[str, InFlight] = {}
        # Per consumer: the scope of its receive loop and the scope of its handlers.
        self._consumers: list[tuple[trio.CancelScope, trio.CancelScope]] = []
        # Claim tokens: unique per process (random prefix) and per claim (counter); cheaper
        # than a uuid4 per job and just as unguessable across processes.
        self._token_prefix = secrets.token_hex(8)
        self._token_seq = itertools.count()
        self._subscriptions: dict[str, Subscription] = {}

    def in_flight(self) -> int:
        """How many jobs this executor is running right now."""
        return len(self._in_flight)

    def liveness_problem(self) -> str | None:
        """Why this executor is not consuming as it should (a subscription that has not
        been a working consumer-group member for a while), or None when it is healthy."""
        problems = [
            problem
            for subscription in self._subscriptions.values()
            if (problem := subscription.problem()) is not None
        ]
        return "; ".join(problems) if problems else None

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
                self._throttled.log(
                    logging.WARNING,
                    "heartbeat failed",
                    key="heartbeat",
                    extra={"jobs": len(entries), "error": str(exc)},
                )
                continue
            self._throttled.recovered("heartbeat", "heartbeats written again")
            for entry, beat in zip(entries, results, strict=True):
                if entry.token not in self._in_flight:
                    continue
                if beat is None:
                    entry.lost = True
                    entry.scope.cancel()
                elif beat.cancel_requested_at is not None and not entry.cancel_requested:
                    # The heartbeat's own reply carries the request: no extra round trip.
                    entry.cancel_requested = True
                    entry.scope.cancel()

    async def consume(
        self, job_type: str, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Consume ``job_type``'s wake-ups, running up to EXECUTOR_CONCURRENCY at once.

        Store round trips are shared: the messages waiting when one arrives are picked
        together, and the outcomes that finish together are written together (by the
        settling task, which then acks their messages). A message frees its running slot
        when its handler returns (see :class:`Slots`), so picks overlap with outcome writes.
        """
        slots = Slots(self._deps.settings.executor_concurrency)
        receiving = trio.CancelScope()
        finished, to_settle = trio.open_memory_channel[Finished](math.inf)
        dead_send, dead_receive = trio.open_memory_channel[Job](DEAD_LETTERS_QUEUED)
        pick_delay = 0.0
        async with (
            self._subscribed(job_type) as subscription,
            trio.open_nursery() as settling,
        ):
            settling.start_soon(self._dead_letter_loop, dead_receive)
            settling.start_soon(self._settle_loop, to_settle, slots, dead_send)
            async with finished, trio.open_nursery() as handlers:
                self._consumers.append((receiving, handlers.cancel_scope))
                log.info("executor consuming", extra={"job_type": job_type, "worker": self._worker})
                task_status.started()
                with receiving:
                    async with trio.open_nursery() as nursery:

                        async def start_held(held: Delivery) -> None:
                            await slots.take(held)
                            await self._start_batch([held], handlers, finished, slots)

                        holding = Holding(self._deps.clock, nursery, start_held)
                        async for delivery in subscription:
                            if holding.keep_if_ahead(delivery):
                                continue
                            await slots.take(delivery)
                            batch = [delivery]
                            for more in subscription.receive_ready(slots.free()):
                                if not holding.keep_if_ahead(more):
                                    slots.take_nowait(more)
                                    batch.append(more)
                            if await self._start_batch(batch, handlers, finished, slots):
                                pick_delay = 0.0
                            else:
                                # The store is failing: its batch was released; wait a
                                # little (longer each time) rather than burn the backlog.
                                pick_delay = min(max(pick_delay * 2, RETRY_DELAY_FIRST), 2.0)
                                await trio.sleep(pick_delay)
            # Draining: no new messages (and no kept wake-up starts: its job stays queued
            # for the reaper); running handlers finish (or are cancelled at the grace
            # deadline and hand their jobs back), then the settling task writes the last
            # outcomes, all before the subscription closes.

    @asynccontextmanager
    async def _subscribed(self, job_type: str) -> AsyncIterator[Subscription]:
        """The bus subscription, known to ``liveness_problem`` while it is open."""
        async with self._deps.bus.subscribe(job_type) as subscription:
            self._subscriptions[job_type] = subscription
            try:
                yield subscription
            finally:
                del self._subscriptions[job_type]

    def drain(self, grace: float) -> None:
        """Stop receiving; give running handlers ``grace`` seconds, then cancel them."""
        deadline = trio.current_time() + grace
        log.info("executor draining", extra={"running": len(self._in_flight), "grace": grace})
        for receiving, handlers in self._consumers:
            receiving.cancel()
            handlers.deadline = min(handlers.deadline, deadline)

    async def run(self, message: WakeUp) -> str:
        """Process one wake-up without a bus (pick, run, write the outcome); returns the
        result label counted in the metrics. Raises StoreError if the outcome is unknown."""
        [picked] = await self._pick([message])
        if picked is None:
            return "stale"
        done = await self._execute(*picked)
        if isinstance(done, str):
            return done
        dead: list[Job] = []
        result = "unknown"  # unless written: the outcome write timed out; the reaper will
        with shielded(OUTCOME_TIMEOUT):  # settle the job
            [result] = await self._write_outcomes([done], dead)
        for job in dead:
            await publish_dead_letter(self._deps.bus, job)
        return result

    # -- pick -----------------------------------------------------------------------------

    async def _pick(self, messages: Sequence[WakeUp]) -> list[tuple[Job, str] | None]:
        """queued -> claimed -> running for each message, all in one round trip. Each entry
        is the running job and its claim token, or None for a stale or duplicate message
        (counted here)."""
        now = utc(self._deps.clock.now())  # once per batch, not in every transition
        tokens = [self._new_token() for _ in messages]
        changes: list[states.Change] = []
        for message, token in zip(messages, tokens, strict=True):
            changes.append(
                states.pick(
                    message.job_id,
                    worker=self._worker,
                    token=token,
                    now=now,
                    queued_for=message.not_before,
                )
            )
            changes.append(states.start(message.job_id, token=token, now=now))
        # Only the start's row is read back (the job to run); the pick's is not needed.
        results = await self._deps.store.apply_many_lean(changes, (False, True) * len(messages))
        # The attempts start now, once the picks are back. ``now`` was read before a round
        # trip that may have waited behind other writes: a stale message's pick could then
        # land after the job had failed and been queued again, and an attempt record saying
        # it began at ``now`` would have begun before the job was due.
        begun = utc(self._deps.clock.now())
        if self._deps.waker is not None:
            self._deps.waker.room_made()  # queued jobs left the queue: room to claim more
        started: list[tuple[Job, str] | None] = []
        for i, (message, token) in enumerate(zip(messages, tokens, strict=True)):
            picked, running = results[2 * i], results[2 * i + 1]
            if picked is False:
                self._count_lost(message.job_type, "pick", message.job_id)
                started.append(None)
            elif not isinstance(running, Job):
                self._count_lost(message.job_type, "start", message.job_id)
                started.append(None)
            else:
                started.append((attrs.evolve(running, claimed_at=begun), token))
        return started

    async def _start_batch(
        self,
        batch: list[Delivery],
        handlers: trio.Nursery,
        finished: trio.MemorySendChannel[Finished],
        slots: Slots,
    ) -> bool:
        """Pick the batch's jobs and start their handlers; False if the store failed (the
        batch's messages are then released)."""
        # Shielded: once sent, the picks must be seen through (a job picked but never run
        # would wait for the reaper), even if draining cancels the receive loop meanwhile.
        error = f"timed out after {OUTCOME_TIMEOUT:.0f}s"
        with shielded(OUTCOME_TIMEOUT):
            try:
                picked = await self._pick([delivery.message for delivery in batch])
            except StoreError as exc:
                error = str(exc)
            else:
                self._throttled.recovered("pick", "store picks jobs again")
                for delivery, started in zip(batch, picked, strict=True):
                    if started is None:
                        slots.stopped(delivery)
                        finished.send_nowait(Finished(delivery, None))
                    else:
                        handlers.start_soon(self._run_delivered, delivery, started, finished, slots)
                return True
        # Outcome unknown: a job is still queued (the reaper re-pends it after
        # QUEUED_TIMEOUT) or claimed by us (recovered after CLAIM_TIMEOUT). Release the
        # messages so the bus moves on; a redelivery would meet the same failing store.
        self._throttled.log(
            logging.ERROR,
            "store failed while picking jobs; their messages are released",
            key="pick",
            extra={
                "jobs": len(batch),
                "job_ids": [d.message.job_id for d in batch],
                "error": error,
            },
        )
        with trio.CancelScope(shield=True):
            for delivery in batch:
                await delivery.release()
                slots.release(delivery)
        return False

    # -- run --------------------------------------------------------------------------------

    async def _run_delivered(
        self,
        delivery: Delivery,
        started: tuple[Job, str],
        finished: trio.MemorySendChannel[Finished],
        slots: Slots,
    ) -> None:
        job = started[0]
        try:
            done = await self._execute(*started)
        except StoreError as exc:
            # The hand-back failed: released; the reaper will recover the job.
            log.error(
                "store failed while handing the job back",
                extra={"job_id": job.id, "tenant": job.tenant_id, "error": str(exc)},
            )
            with trio.CancelScope(shield=True):
                await delivery.release()
            slots.release(delivery)
            return
        except BaseException:
            with trio.CancelScope(shield=True):  # handed back (or left for the reaper)
                await delivery.release()
            slots.release(delivery)
            raise
        slots.stopped(delivery)
        finished.send_nowait(Finished(delivery, done if isinstance(done, Done) else None))

    async def _execute(self, job: Job, token: str) -> Done | str:
        """Run the handler while the heartbeat loop watches the job. Returns what to write,
        or the result label when there is nothing left to write (counted here): "stale" when
        the reaper took the job back meanwhile, "cancelled" when a user's cancel request
        stopped the handler and the job was cancelled. Cancelled (shutdown) or failing
        unexpectedly, it hands the job back before re-raising."""
        logger = FieldsAdapter(
            log, {"job_id": job.id, "tenant": job.tenant_id, "job_type": job.job_type}
        )
        entry = InFlight(job.id, token)
        self._in_flight[token] = entry
        ok = False
        started = time.perf_counter()
        try:
            failure, result, span = await run_attempt(
                self._deps, self._runner, job, entry, logger, self.children
            )
            ok = True
        finally:
            del self._in_flight[token]
            # Cancellation arrives wrapped in exception groups from nested nurseries, so
            # this is a flag, not an ``except Cancelled``.
            if not ok:
                await self._release(job, token, logger)
        self._duration(job.job_type).observe(time.perf_counter() - started)
        if entry.cancel_requested and not entry.lost:
            if await self._finish_cancel(job, token, logger):
                return "cancelled"
            return self._count_lost(job.job_type, "finish_cancel", job.id)
        if entry.lost:
            self._count(job.job_type, "stale")
            logger.warning("job taken back while running; handler cancelled, outcome discarded")
            return "stale"
        return Done(
            job,
            token,
            failure,
            logger,
            result=result,
            outcome=Outcome.TIMED_OUT if entry.timed_out else Outcome.FAILED,
            permanent=entry.permanent,
            span=span,
        )
