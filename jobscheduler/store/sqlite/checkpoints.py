"""WAL checkpoints off the writer's path.

SQLite checkpoints a WAL file in the commit that takes it past 1,000 pages (4 MB): that
commit copies the WAL into the database and syncs it, and on a slow disk the writer stood
still for about 200 ms each time (a rate-limited drain started a third fewer jobs in such a
second). Here a connection of its own checkpoints instead (``PASSIVE``: it never waits for,
nor holds up, the writer or the readers) once the writes have changed
:data:`CHECKPOINT_ROWS` rows since the last one. While writes go on, the WAL is seldom
found copied whole when the next one begins, so it is seldom started over: the writer
still checkpoints in its commit past :data:`WAL_SIZE_LIMIT` (``wal_autocheckpoint``),
where it finds all but the last writes copied already, and the WAL starts over.

SQLite syncs the database file only at the end of a checkpoint that copied the WAL whole,
which under steady writes is the writer's one past the limit: that sync then flushed every
page the checkpointer had copied since the last one, and the writer stood still 60-105 ms
each 64 MB of WAL (every 3 s beside a prune; with a 256 MB limit 400 ms). So the
checkpointer syncs the database file itself after each checkpoint, on a descriptor of its
own, and the writer's sync finds little left to flush.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import trio

log = logging.getLogger(__name__)

#: Rows the writes change between two checkpoints (a few MB of WAL).
CHECKPOINT_ROWS = 2000
#: Bytes of WAL past which the writer checkpoints in its commit (and starts the WAL over);
#: the size the WAL file is cut back to after a checkpoint that emptied it.
WAL_SIZE_LIMIT = 64 * 1024 * 1024


class Checkpointer:
    """Checkpoints the WAL on its own connection and syncs the database file; its owner
    runs :meth:`serve`, the writer reports what it changed with :meth:`changed` (both on
    the trio side), and the owner calls :meth:`release` once every connection to the file is
    closed."""

    def __init__(self, conn: sqlite3.Connection, database: Path) -> None:
        self._conn = conn
        # Closed only by release(): closing a descriptor of the file drops every POSIX
        # lock this process holds on it, SQLite's own included.
        self._file: int | None = os.open(database, os.O_RDONLY)
        self._changed = 0
        self._due = trio.Event()
        self._scope = trio.CancelScope()
        self._served = trio.Event()
        #: Checkpoints run so far.
        self.runs = 0

    def changed(self, rows: int) -> None:
        """The writer changed ``rows`` rows: a checkpoint is due past CHECKPOINT_ROWS."""
        self._changed += rows
        if self._changed >= CHECKPOINT_ROWS:
            self._due.set()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Checkpoint each time one is due, until :meth:`stop` (or the run's end)."""
        task_status.started()
        try:
            with self._scope:
                while True:
                    await self._due.wait()
                    self._due, self._changed = trio.Event(), 0
                    try:
                        # Not abandoned: the connection is closed only once this is done.
                        await trio.to_thread.run_sync(self._checkpoint)
                    except sqlite3.Error as exc:
                        log.warning("WAL checkpoint failed", extra={"error": str(exc)})
        finally:
            self._served.set()

    async def stop(self) -> None:
        """End :meth:`serve` once a checkpoint under way is done, and close the connection
        (the writer's close, last, checkpoints what is left)."""
        self._scope.cancel()
        await self._served.wait()
        self._conn.close()

    def release(self) -> None:
        """Close the database file's descriptor (once no connection to the file is open)."""
        file, self._file = self._file, None
        if file is not None:
            os.close(file)

    def _checkpoint(self) -> None:
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        if self._file is not None:
            os.fsync(self._file)
        self.runs += 1
