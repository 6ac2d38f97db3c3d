"""The SQLite store's upkeep: counters kept by triggers, pruning, retention overrides, and
the file's free pages (see :mod:`jobscheduler.store.upkeep`).

**Counters.** ``job_counts`` holds one row per (tenant, status, job type). Triggers on the
jobs table add and take away in the statement's own transaction, so every write path --
inserts, claims, transitions, bulk changes, deletes, and any written later -- keeps them
exact with no code of its own. A file made before the counters gets them from one count at
start.

**Space.** A new file is made with ``auto_vacuum = INCREMENTAL``; an older one is converted
at start (one ``VACUUM``). Deleted jobs leave free pages that :meth:`reclaim_space` hands
back to the file system a bounded number at a time.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import trio

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.retention import Override, PruneSummary, Scope
from jobscheduler.store.ends import step_of
from jobscheduler.store.query import CountKey, Statuses

from .codec import _SELECT, _from_row, _millis, from_millis, to_millis, to_nullable_millis
from .conn import SQLiteConnection
from .ends import ENDS_SCHEMA, FORGET_ENDS, count_recent_ends
from .where import status_condition

#: The counters, their triggers, and the overrides. The update trigger fires only when a
#: counted column changes (heartbeats and the like cost nothing).
COUNTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS job_counts (
    tenant_id TEXT NOT NULL,
    status    TEXT NOT NULL,
    job_type  TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, status, job_type)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS job_counts_insert AFTER INSERT ON jobs BEGIN
    INSERT INTO job_counts VALUES (NEW.tenant_id, NEW.status, NEW.job_type, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS job_counts_update AFTER UPDATE OF status, tenant_id, job_type
    ON jobs WHEN OLD.status IS NOT NEW.status OR OLD.tenant_id IS NOT NEW.tenant_id
        OR OLD.job_type IS NOT NEW.job_type BEGIN
    UPDATE job_counts SET n = n - 1
        WHERE tenant_id = OLD.tenant_id AND status = OLD.status AND job_type = OLD.job_type;
    INSERT INTO job_counts VALUES (NEW.tenant_id, NEW.status, NEW.job_type, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS job_counts_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_counts SET n = n - 1
        WHERE tenant_id = OLD.tenant_id AND status = OLD.status AND job_type = OLD.job_type;
END;
CREATE TABLE IF NOT EXISTS prune_sweeps (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    summary TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS retention (
    scope      TEXT NOT NULL,
    name       TEXT NOT NULL,
    keep       TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (scope, name)
) WITHOUT ROWID;
"""

#: The pruning index: finished one-off jobs by (status, tenant, type), oldest finish first.
#: Partial, so a transition of an unfinished job never touches it.
PRUNE_WHERE = "finished_at IS NOT NULL AND cron IS NULL"
#: Workflow steps are not pruned one by one: a running workflow's later steps read their
#: parents' results. They go with their workflow once it is past its retention
#: (:meth:`~jobscheduler.roles.reaper.pruning.Pruner._prune_workflows`).
NOT_A_STEP = "workflow_id IS NULL"
PRUNE_INDEX = (
    "CREATE INDEX IF NOT EXISTS jobs_prune "
    f"ON jobs (status, tenant_id, job_type, finished_at) WHERE {PRUNE_WHERE};"
)

#: Rows one statement of a prune deletes, and the time after which a prune (or a reclaim of
#: free pages) leaves the writer to others: a write queued behind it waits one slice at most
#: (beside a prune of 300,000 jobs, a write every 5 ms: p99 8-9 ms with slices of 100 rows,
#: 5-7 ms with 25, 0.9 ms without a prune).
PRUNE_SLICE_ROWS = 25
PRUNE_SLICE_SECONDS = 0.01
#: Seconds a prune waits, after a slice that gave way to other writes, before its next: under
#: load a prune runs at a fraction of its idle pace (700-1,900 jobs/s beside 200 jobs/s; about
#: 3,000 at 0.02 s), so that what it writes costs the steady load little (the start delay's
#: p99 during a prune of 1,000,000: median 1.6x without one over eight runs; 2.5x at 0.02 s).
PRUNE_BUSY_PAUSE = 0.1

T = TypeVar("T")

_RECOUNT = "SELECT tenant_id, status, job_type, COUNT(*) FROM jobs GROUP BY 1, 2, 3"


def make_incremental(conn: sqlite3.Connection) -> None:
    """Set ``auto_vacuum = INCREMENTAL`` on the file: a new one at once, an older one by
    one ``VACUUM`` (which rewrites it: seconds for a file of a few hundred MB, once)."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
        return
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        # The file exists already (a WAL header is enough): only a VACUUM changes it.
        conn.execute("VACUUM")


def prepare_counts(conn: sqlite3.Connection) -> None:
    """Create the counters (of jobs, and of ends: :mod:`.ends`), their triggers, the
    overrides and the pruning index; a file made before the counters gets them counted
    once (in the triggers' transaction)."""
    fresh = not _has_table(conn, "job_counts")
    no_ends = not _has_table(conn, "job_ends")
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _statements(COUNTS_SCHEMA + ENDS_SCHEMA + PRUNE_INDEX):
            conn.execute(statement)
        if fresh:
            conn.execute(f"INSERT INTO job_counts {_RECOUNT}")
        if no_ends:
            count_recent_ends(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return found is not None


def _statements(script: str) -> list[str]:
    """``script``'s statements (a trigger's body kept whole)."""
    out: list[str] = []
    current = ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            out.append(current.strip())
            current = ""
    return out


class SQLiteUpkeepMixin(SQLiteConnection):
    """Counters, pruning, overrides and free pages on the store's SQLite file."""

    def _writes_waiting(self) -> bool:
        """Whether another write is queued (read by an upkeep op in the writer's thread,
        between two of its slices)."""
        return self._batches is not None and self._batches.waiting()

    async def _paced_write(self, op: Callable[[sqlite3.Connection], tuple[T, bool]]) -> T:
        """Run an upkeep ``op`` as a background write; ``op`` returns its result and whether
        it gave way to another write, after which this returns PRUNE_BUSY_PAUSE later."""
        result, gave_way = await self._write(op, background=True)
        if gave_way:
            await trio.sleep(PRUNE_BUSY_PAUSE)
        return result

    async def job_counters(self, statuses: Statuses = None) -> dict[CountKey, int]:
        where = "" if statuses is None else f" AND {status_condition(statuses)}"
        sql = f"SELECT tenant_id, status, job_type, n FROM job_counts WHERE n != 0{where}"
        rows = await self._read(lambda conn: conn.execute(sql).fetchall())
        return {(tenant, Status(status), job_type): n for tenant, status, job_type, n in rows}

    async def reconcile_counts(self) -> dict[CountKey, tuple[int, int]]:
        """The recount runs on a reader (no write waits on it). The triggers keep the
        counters exact, so it finds nothing unless the file was edited by hand; a key it
        finds wrong is counted again in the writer's transaction and set."""

        def compare(conn: sqlite3.Connection) -> list[CountKey]:
            conn.execute("BEGIN")  # one snapshot for both reads
            try:
                actual = {(t, s, j): n for t, s, j, n in conn.execute(_RECOUNT)}
                kept = {
                    (t, s, j): n
                    for t, s, j, n in conn.execute(
                        "SELECT tenant_id, status, job_type, n FROM job_counts"
                    )
                }
            finally:
                conn.execute("COMMIT")
            return [
                key for key in set(actual) | set(kept) if actual.get(key, 0) != kept.get(key, 0)
            ]

        suspects = await self._read(compare)
        if not suspects:
            return {}

        def repair(conn: sqlite3.Connection) -> dict[CountKey, tuple[int, int]]:
            wrong: dict[CountKey, tuple[int, int]] = {}
            for tenant, status, job_type in suspects:
                row = conn.execute(
                    "SELECT n FROM job_counts WHERE tenant_id = ? AND status = ? AND job_type = ?",
                    (tenant, status, job_type),
                ).fetchone()
                actual = conn.execute(
                    "SELECT COUNT(*) FROM jobs WHERE tenant_id = ? AND status = ? AND job_type = ?",
                    (tenant, status, job_type),
                ).fetchone()[0]
                kept = 0 if row is None else row[0]
                if kept != actual:
                    conn.execute(
                        "INSERT INTO job_counts VALUES (?, ?, ?, ?) "
                        "ON CONFLICT DO UPDATE SET n = excluded.n",
                        (tenant, status, job_type, actual),
                    )
                    wrong[(tenant, Status(status), job_type)] = (kept, actual)
            return wrong

        return await self._write(repair)

    async def expired_jobs(self, key: CountKey, before: datetime, limit: int) -> list[Job]:
        tenant, status, job_type = key
        sql = (
            f"SELECT {_SELECT} FROM jobs INDEXED BY jobs_prune WHERE {PRUNE_WHERE} "
            f"AND {NOT_A_STEP} AND status = ? AND tenant_id = ? AND job_type = ? "
            "AND finished_at < ? "
            "ORDER BY finished_at ASC LIMIT ?"
        )
        params = (Status(status).value, tenant, job_type, _millis(before), limit)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])

    async def prune_expired(self, key: CountKey, before: datetime, limit: int) -> int:
        """``DELETE ... WHERE id IN (<the oldest expired, by jobs_prune>) RETURNING id`` and
        the records of those ids, in the writer's transaction: no row goes through Python.
        Up to ``limit`` rows, in background writes (each a batch of its own, once no other
        write is queued) of slices of PRUNE_SLICE_ROWS; a write stops after the slice
        during which another write was queued, or PRUNE_SLICE_SECONDS in, so a create or a
        claim waits for one slice at most. The next write follows at once, or
        PRUNE_BUSY_PAUSE later after one that gave way; the call returns once ``limit`` rows
        are deleted or none is left."""
        tenant, status, job_type = key
        sql = (
            "DELETE FROM jobs WHERE id IN ("
            f"  SELECT id FROM jobs INDEXED BY jobs_prune WHERE {PRUNE_WHERE} "
            f"  AND {NOT_A_STEP} AND status = ? AND tenant_id = ? AND job_type = ? "
            "  AND finished_at < ? "
            "  ORDER BY finished_at ASC LIMIT ?"
            ") RETURNING id"
        )
        params = (Status(status).value, tenant, job_type, _millis(before))
        deleted, left = 0, [True]

        def op(conn: sqlite3.Connection) -> tuple[int, bool]:
            done = 0
            deadline = time.perf_counter() + PRUNE_SLICE_SECONDS
            while deleted + done < limit:
                rows = min(PRUNE_SLICE_ROWS, limit - deleted - done)
                ids = conn.execute(sql, (*params, rows)).fetchall()
                conn.executemany("DELETE FROM attempts WHERE job_id = ?", ids)
                done += len(ids)
                if len(ids) < rows:
                    left[0] = False
                    break
                if time.perf_counter() >= deadline:
                    break
                if self._writes_waiting():
                    return done, True
            return done, False

        while left[0] and deleted < limit:
            deleted += await self._paced_write(op)
        return deleted

    async def delete_jobs(self, jobs: Sequence[Job]) -> int:
        """One background write per PRUNE_SLICE_ROWS jobs (each a transaction of its own:
        a job's delete is conditional on its own, so nothing needs them together), so that
        a create or a claim waits for one slice at most. As in a prune, a slice during which
        another write was queued is followed by PRUNE_BUSY_PAUSE."""
        rows = [
            (
                job.id,
                job.status.value,
                to_nullable_millis(job.finished_at),
            )
            for job in jobs
        ]

        Part = Sequence[tuple[str, str, int | None]]

        def op(part: Part) -> Callable[[sqlite3.Connection], tuple[int, bool]]:
            def delete(conn: sqlite3.Connection) -> tuple[int, bool]:
                deleted = 0
                for job_id, status, finished in part:
                    if conn.execute(
                        "DELETE FROM jobs WHERE id = ? AND status = ? AND finished_at IS ?",
                        (job_id, status, finished),
                    ).rowcount:
                        conn.execute("DELETE FROM attempts WHERE job_id = ?", (job_id,))
                        deleted += 1
                return deleted, self._writes_waiting()

            return delete

        deleted = 0
        for start in range(0, len(rows), PRUNE_SLICE_ROWS):
            deleted += await self._paced_write(op(rows[start : start + PRUNE_SLICE_ROWS]))
        return deleted

    async def set_retention(self, override: Override) -> None:
        key = (override.scope.value, override.name)
        keep = json.dumps({status.value: seconds for status, seconds in override.keep.items()})
        stamp = to_millis(override.updated_at)

        def op(conn: sqlite3.Connection) -> None:
            if not override.keep:
                conn.execute("DELETE FROM retention WHERE scope = ? AND name = ?", key)
                return
            conn.execute(
                "INSERT INTO retention VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET "
                "keep = excluded.keep, updated_at = excluded.updated_at",
                (*key, keep, stamp),
            )

        await self._write(op)

    async def retention_overrides(self) -> list[Override]:
        sql = "SELECT scope, name, keep, updated_at FROM retention ORDER BY scope, name"
        rows = await self._read(lambda conn: conn.execute(sql).fetchall())
        return [_override(row) for row in rows]

    async def record_prune(self, summary: PruneSummary) -> None:
        text = json.dumps(summary.to_json())

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO prune_sweeps VALUES (1, ?) "
                "ON CONFLICT DO UPDATE SET summary = excluded.summary",
                (text,),
            )

        await self._write(op)

    async def last_prune(self) -> PruneSummary | None:
        sql = "SELECT summary FROM prune_sweeps WHERE id = 1"
        row = await self._read(lambda conn: conn.execute(sql).fetchone())
        return None if row is None else PruneSummary.from_json(json.loads(row[0]))

    async def forget_ends(self, before: datetime) -> int:
        step = step_of(before)

        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(FORGET_ENDS, (step,)).rowcount

        return await self._write(op, background=True)

    async def reclaim_space(self, max_pages: int) -> int:
        """``PRAGMA incremental_vacuum`` a page at a time (Python's ``execute`` runs one step
        of it, which frees one page, whatever the count asked) in a background write, up to
        ``max_pages``, stopping once another write is queued or PRUNE_SLICE_SECONDS in: each
        call holds the writer for a bounded time (the caller calls again until it frees
        nothing). Like a prune's, a call that gave way returns PRUNE_BUSY_PAUSE later."""

        def op(conn: sqlite3.Connection) -> tuple[int, bool]:
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            deadline = time.perf_counter() + PRUNE_SLICE_SECONDS
            freed, gave_way = 0, False
            while freed < min(free, max_pages):
                conn.execute("PRAGMA incremental_vacuum(1)")
                freed += 1
                if freed % 16 == 0:
                    gave_way = self._writes_waiting()
                    if gave_way or time.perf_counter() >= deadline:
                        break
            return int(free - conn.execute("PRAGMA freelist_count").fetchone()[0]), gave_way

        if self._memory:
            return 0
        freed = await self._paced_write(op)
        if not freed:
            # Done: the pages freed so far leave the file once the WAL's frames are copied
            # back, so a passive checkpoint now (on a reader: no write waits on it) rather
            # than at the next auto-checkpoint that finds no reader in the way.
            await self._read(lambda conn: conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall())
        return int(freed)


def _override(row: Sequence[Any]) -> Override:
    scope, name, keep, updated = row
    return Override(
        scope=Scope(scope),
        name=name,
        keep={Status(status): float(seconds) for status, seconds in json.loads(keep).items()},
        updated_at=from_millis(updated),
    )


__all__ = ["COUNTS_SCHEMA", "SQLiteUpkeepMixin", "make_incremental", "prepare_counts"]
