"""WAL checkpoints mostly off the writer's path.

SQLite checkpoints a WAL file in the commit that takes it past 1,000 pages (4 MB): that
commit copies the WAL into the database and syncs it, and on a slow disk the writer stood
still for about 200 ms each time (a rate-limited drain started a third fewer jobs in such a
second). Here a connection of its own checkpoints instead (``PASSIVE``: it never waits for,
nor holds up, the writer or the readers) once the writes have changed
:data:`CHECKPOINT_ROWS` rows since the last one. While writes go on, the WAL is seldom
found copied whole when the next one begins, so it is seldom started over: the writer
still checkpoints in its commit past :data:`WAL_SIZE_LIMIT` (``wal_autocheckpoint``),
where it finds all but the last writes copied already, and the WAL starts over (one short
stop per 64 MB of writes, not one per 4 MB).
"""

from __future__ import annotations

import logging
import sqlite3

import trio

log = logging.getLogger(__name__)

#: Rows the writes change between two checkpoints (a few MB of WAL).
CHECKPOINT_ROWS = 2000
#: Bytes of WAL past which the writer checkpoints in its commit (and starts the WAL over);
#: the size the WAL file is cut back to after a checkpoint that emptied it.
WAL_SIZE_LIMIT = 64 * 1024 * 1024


class Checkpointer:
    """Checkpoints the WAL on its own connection; its owner runs :meth:`serve`, the writer
    reports what it changed with :meth:`changed` (both on the trio side)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
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

    def _checkpoint(self) -> None:
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        self.runs += 1
