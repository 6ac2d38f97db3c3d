"""The SQLite store's group commit: one thread owns the writer connection and runs the
queued writes batch by batch.

A caller queues its operation and waits. While the thread is idle, the first caller to run
after queuing hands everything queued to it as one batch; while a batch runs, what arrives
queues for the next one, which the batch's end hands over at once. So under load batches
grow by themselves, and each costs one transaction, one commit and one wake-up of the trio
run (the outcomes of the whole batch come back in one ``run_sync_soon``).

Each operation runs inside its own SAVEPOINT when the batch has several, so one failed
insert fails only itself and per-job transitions stay individually atomic.

Upkeep (a prune, a reclaim of free pages) is queued as *background*: such an operation
runs alone in its batch, only when no other write is queued, and stops early once one is
(:meth:`BatchWriter.waiting`). So a create or a claim never shares a batch with it, and
waits for at most the rest of one of its slices. Under a load that keeps writes always
queued, a background write that has waited :data:`BACKGROUND_MAX_WAIT` goes next all the
same (and, finding writes queued, does the least it can), so upkeep slows but never stops.

Cancellation is that of a thread call: a caller cancelled while its write is queued
withdraws it; once its batch is with the thread, the write runs to its end and the caller
waits for its outcome (the cancellation comes at its next checkpoint). Request handlers
bound that wait with :class:`~jobscheduler.api.bounded.BoundedCalls`, which detaches a call
that outlives its deadline.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import trio

from jobscheduler.errors import StoreError, ValidationError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The writer thread's name while it serves a store.
THREAD_NAME = "sqlite-writer"
#: Seconds a background write waits at most for a moment with no other write queued.
BACKGROUND_MAX_WAIT = 0.1


class _Slot(Generic[T]):
    """One queued write: the operation and, once run, its result or error; ``task`` is
    the caller while it waits for them."""

    __slots__ = ("done", "error", "op", "queued_at", "result", "task")

    def __init__(self, op: Callable[[sqlite3.Connection], T]) -> None:
        self.op = op
        self.queued_at = trio.current_time()
        self.result: T | None = None
        self.error: BaseException | None = None
        self.done = False
        self.task: trio.lowlevel.Task | None = None


def _edge_error(exc: Exception) -> Exception:
    """A failed operation's error as callers may see it: project errors pass, a driver
    error becomes StoreError, an unencodable string a ValidationError."""
    if isinstance(exc, sqlite3.Error):
        mapped: Exception = StoreError(f"SQLite write failed: {exc}")
    elif isinstance(exc, UnicodeEncodeError):
        mapped = ValidationError(f"a string is not valid Unicode: {exc.reason}")
    else:
        return exc
    mapped.__cause__ = exc
    return mapped


def run_batch(conn: sqlite3.Connection, batch: list[_Slot[Any]]) -> None:
    """Run every slot's operation in one transaction; every slot gets its result or error.

    A failing operation fails alone (its SAVEPOINT is rolled back). If the transaction
    itself fails (BEGIN, a savepoint, COMMIT), nothing of the batch was written and every
    slot gets the error.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
        # An operation alone in its transaction (a create arriving alone) needs no
        # savepoint: if it fails, the whole transaction is rolled back.
        lone = len(batch) == 1
        for slot in batch:
            if not lone:
                conn.execute("SAVEPOINT op")
            try:
                slot.result = slot.op(conn)
            except Exception as exc:
                if not conn.in_transaction:
                    # SQLite rolled the whole transaction back itself (SQLITE_FULL, an I/O
                    # error): every write of the batch is lost, so all fail with it.
                    raise
                slot.error = _edge_error(exc)
                if lone:
                    conn.execute("ROLLBACK")
                    return
                conn.execute("ROLLBACK TO op")
            if not lone:
                conn.execute("RELEASE op")
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        error = exc if isinstance(exc, StoreError) else StoreError(f"SQLite write failed: {exc}")
        if error is not exc:
            error.__cause__ = exc
        for slot in batch:
            slot.error, slot.result = error, None
        if not isinstance(exc, Exception):
            raise


class BatchWriter:
    """The writer thread of one connection, serving the trio run that started it; its owner
    runs :meth:`serve`."""

    def __init__(
        self, conn: sqlite3.Connection, on_changes: Callable[[int], None] | None = None
    ) -> None:
        self.conn = conn
        #: Told (trio side) how many rows each batch changed.
        self._on_changes = on_changes
        self._token = trio.lowlevel.current_trio_token()
        #: Writes waiting for the next batch (trio side: only the trio run touches it).
        self._pending: list[_Slot[Any]] = []
        #: Background writes waiting for a batch of their own (trio side).
        self._background: list[_Slot[Any]] = []
        #: A batch is with the thread (trio side).
        self._busy = False
        #: The batch handed to the thread and not yet taken (under ``_ready``).
        self._handed: list[_Slot[Any]] | None = None
        self._stopping = False
        self._ready = threading.Condition(threading.Lock())
        #: Set once the thread has left its loop (or been abandoned at the run's end).
        self._served = trio.Event()
        #: The thread serving the batches, once it runs.
        self.thread: threading.Thread | None = None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the writer thread until :meth:`stop`: the task that owns it (the store starts
        it as a system task of the trio run, so the run's end cancels it). A cancelled owner
        abandons a thread stuck on a stalled disk; it ends when the disk answers."""
        task_status.started()
        try:
            await trio.to_thread.run_sync(
                self._serve, abandon_on_cancel=True, limiter=trio.CapacityLimiter(1)
            )
        finally:
            # Cancelled (the run ends without close()): the thread leaves after its batch.
            with self._ready:
                self._stopping = True
                self._ready.notify()
            self._served.set()

    async def write(
        self,
        op: Callable[[sqlite3.Connection], T],
        *,
        abandon_on_cancel: bool = False,
        background: bool = False,
    ) -> T:
        """``op(conn)`` in the next batch: its result, or the error it raised (mapped).
        With ``abandon_on_cancel`` a cancelled caller stops waiting even for a write the
        thread has taken (it runs on, its outcome unknown). A ``background`` write runs in
        a batch of its own once no other write is queued (the module's docstring)."""
        if trio.lowlevel.current_trio_token() is not self._token:
            # Its outcome would be handed back to the run that started the store.
            raise RuntimeError("a SQLite store is used outside the trio run that started it")
        slot: _Slot[T] = _Slot(op)
        (self._background if background else self._pending).append(slot)
        try:
            # Yield once, so the writes of the tasks made runnable together with this one
            # (an executor's outcomes and its next pick) are queued by then and share the
            # batch: one commit.
            await trio.lowlevel.checkpoint()
        except BaseException:
            self._withdraw(slot)
            raise
        if not self._busy:
            self._hand_over()
        if not slot.done:

            def abort(_: Any) -> trio.lowlevel.Abort:
                # Queued: withdrawn. With the thread: it runs to its end, and we wait
                # (unless abandoning it).
                if self._withdraw(slot) or abandon_on_cancel:
                    slot.task = None
                    return trio.lowlevel.Abort.SUCCEEDED
                return trio.lowlevel.Abort.FAILED

            slot.task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(abort)
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]

    def waiting(self) -> bool:
        """Writes are queued for the next batch: read by an operation of the running batch
        (in the writer thread) that can stop early and leave the writer to them. A hint
        read without the trio run's lock: a write queued just after it was read waits for
        the operation's next look."""
        return bool(self._pending)

    async def stop(self) -> None:
        """Run the writes already queued, then end the thread. A caller that gives up (is
        cancelled: a shutdown's bounded close) leaves a thread stuck on a stalled disk
        behind."""
        # Queued last: when it has run, so have the others (its own error, on a database
        # that refuses writes, does not matter).
        with contextlib.suppress(StoreError):
            await self.write(lambda conn: None, abandon_on_cancel=True)
        with self._ready:
            self._stopping = True
            self._ready.notify()
        await self._served.wait()

    def _withdraw(self, slot: _Slot[Any]) -> bool:
        for queue in (self._pending, self._background):
            if slot in queue:
                queue.remove(slot)
                return True
        return False

    def _hand_over(self) -> None:
        """Give the thread its next batch (trio side): every queued write as one, else (or
        once it has waited BACKGROUND_MAX_WAIT) the first background write alone."""
        overdue = bool(self._background) and (
            trio.current_time() - self._background[0].queued_at >= BACKGROUND_MAX_WAIT
        )
        if self._pending and not overdue:
            batch, self._pending = self._pending, []
        elif self._background:
            batch = [self._background.pop(0)]
        else:
            return
        self._busy = True
        with self._ready:
            self._handed = batch
            self._ready.notify()

    def _finished(self, batch: list[_Slot[Any]], changes: int) -> None:
        """A batch is done (trio side): wake its callers, hand over the next one."""
        self._busy = False
        if self._on_changes is not None:
            self._on_changes(changes)
        for slot in batch:
            slot.done = True
            task, slot.task = slot.task, None
            if task is not None:
                trio.lowlevel.reschedule(task)
        self._hand_over()

    def _serve(self) -> None:
        """The thread: run each batch handed over, and hand its outcomes back."""
        self.thread = thread = threading.current_thread()
        name, thread.name = thread.name, THREAD_NAME
        try:
            self._serve_batches()
        finally:
            thread.name = name

    def _serve_batches(self) -> None:
        while True:
            with self._ready:
                while self._handed is None and not self._stopping:
                    self._ready.wait()
                batch, self._handed = self._handed, None
            if batch is None:
                return
            before = self.conn.total_changes
            try:
                run_batch(self.conn, batch)
            except BaseException:  # every slot has its error; the thread serves on
                log.exception("SQLite writer: a batch ended with an unexpected error")
            finally:
                # A run that has ended has no caller left to wake.
                with contextlib.suppress(trio.RunFinishedError):
                    changes = self.conn.total_changes - before
                    self._token.run_sync_soon(self._finished, batch, changes)
