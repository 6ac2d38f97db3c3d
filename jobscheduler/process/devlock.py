"""``dev`` is the only executor of its SQLite file: an OS lock on ``<file>.lock`` makes it so.

The lock is ``fcntl.flock`` (exclusive, non-blocking) on a file beside the database. The
kernel drops it when the process dies, however it dies (``kill -9`` included), so a restarted
``dev`` always gets it, and a second ``dev`` on the same file is refused while the first
runs. Holding it is what lets ``dev`` recover the previous process's in-flight jobs at once
(:mod:`jobscheduler.roles.reaper.recovery`). The lock file keeps the holder's pid, for the refusal
message.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from jobscheduler.errors import StoreLocked


class DevLock:
    """The exclusive lock of one SQLite file; :meth:`acquire` it, :meth:`release` it (or exit)."""

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self.database = Path(database)
        self.path = self.database.with_name(self.database.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (creating the directory and lock file if needed).

        Raises StoreLocked, naming the holder's pid, if another process holds it.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreLocked(
                f"{self.database} is already in use by another `jobscheduler dev` "
                f"(pid {holder}); stop it first or set SQLITE_PATH to another file"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock. Safe to call twice (the lock file stays; it is harmless)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> DevLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
