"""The archive of pruned jobs (``ARCHIVE_DIR``): one gzip JSON Lines file per day and
tenant, ``<dir>/<tenant>/<YYYY-MM-DD>.jsonl.gz`` (the day the job finished, UTC; the tenant
percent-encoded), each line a job as ``GET /jobs/{id}`` shows it, with its attempt records
as ``GET /jobs/{id}/attempts`` lists them (``"attempts"``, oldest first).

Crash safety: the reaper deletes a batch only after :meth:`Archive.write` returned, and that
returns only once every line is on disk. Each write appends one gzip member (a file is a
concatenation of members, which ``gzip``/``zcat`` read as one), fsyncs the file, then records
the file's new length in a sidecar (``.<name>.len``, replaced atomically). A crash during an
append leaves a partial member past the recorded length, which the next write to that file
cuts off first; its jobs were not deleted, so they are written again. A crash after the
append but before the delete writes those lines twice; no line is ever lost.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

import trio

from jobscheduler.domain.attempts import Attempt, attempt_to_json
from jobscheduler.domain.model import Job, job_to_json


def archive_path(root: Path, job: Job) -> Path:
    """Where ``job``'s line goes: its tenant's folder, the day it finished."""
    tenant = quote(job.tenant_id, safe="") or "%00"
    if tenant in (".", ".."):
        tenant = tenant.replace(".", "%2E")
    finished = job.finished_at or job.updated_at
    return root / tenant / f"{finished.date().isoformat()}.jsonl.gz"


def _sidecar(path: Path) -> Path:
    return path.with_name(f".{path.name}.len")


def _good_length(path: Path) -> int:
    """The length of ``path`` known to end on a whole member."""
    try:
        return int(_sidecar(path).read_text().strip())
    except (FileNotFoundError, ValueError):
        # No record: a file written before the sidecars, or none yet.
        return path.stat().st_size if path.exists() else 0


def append_lines(path: Path, lines: Sequence[str]) -> None:
    """Append ``lines`` to ``path`` as one gzip member, durably (blocking; module doc)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    good = _good_length(path)
    member = gzip.compress("".join(line + "\n" for line in lines).encode(), mtime=0)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        os.ftruncate(fd, good)  # a partial member a crash left behind
        os.lseek(fd, good, os.SEEK_SET)
        view = memoryview(member)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    sidecar = _sidecar(path)
    temporary = sidecar.with_name(sidecar.name + ".tmp")
    temporary.write_text(str(good + len(member)))
    with open(temporary, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(temporary, sidecar)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_archive(path: Path) -> list[dict[str, object]]:
    """The jobs in one archive file, up to its recorded length (for tests and tools)."""
    data = path.read_bytes()[: _good_length(path)]
    text = gzip.decompress(data).decode() if data else ""
    return [json.loads(line) for line in text.splitlines() if line]


class Archive:
    """Writes pruned jobs under ``root`` (module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._limiter = trio.CapacityLimiter(1)

    async def write(
        self, jobs: Sequence[Job], attempts: Mapping[str, Sequence[Attempt]] | None = None
    ) -> None:
        """Every job's line, with its records from ``attempts`` (by job id), on disk, grouped
        by file, when this returns (OSError if not)."""
        attempts = attempts or {}
        files: dict[Path, list[str]] = defaultdict(list)
        for job in jobs:
            shown = job_to_json(job)
            shown["attempts"] = [attempt_to_json(a) for a in attempts.get(job.id, ())]
            line = json.dumps(shown, separators=(",", ":"), ensure_ascii=False)
            files[archive_path(self.root, job)].append(line)

        def write_all() -> None:
            for path, lines in files.items():
                append_lines(path, lines)

        await trio.to_thread.run_sync(write_all, limiter=self._limiter)


__all__ = ["Archive", "append_lines", "archive_path", "read_archive"]
