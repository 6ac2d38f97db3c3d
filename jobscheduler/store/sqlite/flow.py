"""The SQLite store's flow control: fair candidates through the ``jobs_fair`` index, slot
claims fenced by unique indexes, rate buckets, limits, weights and the leader's report."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from jobscheduler.domain.flow import FlowReport, LimitOverride, Limits, TenantWeight
from jobscheduler.domain.model import Job
from jobscheduler.domain.states import claim_fields
from jobscheduler.store.query import DUE_ONE_OFF, Candidate, Exclusions, JobQuery, Pick

from .codec import _COLUMNS, _EPOCH, _SELECT, _from_row, _millis, _to_db, from_millis
from .conn import SQLiteConnection, in_lists, placeholders
from .where import QUEUED, index_where

#: The slots' unique indexes (SQLite's UNIQUE lets any number of NULLs through) and the
#: tables of the flow state. ``jobs_fair`` is a partial index of where.py.
FLOW_SCHEMA = """
CREATE UNIQUE INDEX IF NOT EXISTS jobs_key_slot ON jobs (key_slot) WHERE key_slot IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS jobs_type_slot ON jobs (type_slot) WHERE type_slot IS NOT NULL;
CREATE TABLE IF NOT EXISTS flow_buckets (
    scope TEXT PRIMARY KEY, tat INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS flow_limits (
    tenant_id TEXT NOT NULL, job_type TEXT NOT NULL, limits TEXT NOT NULL,
    PRIMARY KEY (tenant_id, job_type)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS flow_weights (
    tenant_id TEXT PRIMARY KEY, weight INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS flow_report (
    id INTEGER PRIMARY KEY CHECK (id = 1), report TEXT NOT NULL
);
"""

_DUE = index_where(DUE_ONE_OFF)
_TOP_LEVEL = f"SELECT MAX(priority) FROM jobs INDEXED BY jobs_fair WHERE {_DUE}"
_NEXT_LEVEL = _TOP_LEVEL + " AND priority < ?"
# A skip-scan of the groups of a level: the next fairness key of the tenant, else the next
# tenant's first group. Two one-column ranges: SQLite seeks a row-value range
# ``(tenant_id, fairness_key) > (?, ?)`` on its first column only, and would walk every due
# job of the last group (a large backlog) to find there is none after it.
_NEXT_KEY = (
    f"SELECT fairness_key FROM jobs INDEXED BY jobs_fair WHERE {_DUE} "
    "AND priority = ? AND tenant_id = ? AND fairness_key > ? ORDER BY fairness_key LIMIT 1"
)
_NEXT_TENANT = (
    f"SELECT tenant_id, fairness_key FROM jobs INDEXED BY jobs_fair WHERE {_DUE} "
    "AND priority = ? AND tenant_id > ? ORDER BY tenant_id, fairness_key LIMIT 1"
)
# A claim's rows by id (the primary key): the unary + keeps the planner off the status and
# due-time indexes, which it would otherwise walk for every pending job.
assert _DUE.startswith("status = "), _DUE
_BY_ID_DUE = f"+{_DUE} AND +scheduled_at <= ?"
# What a fair claim reads of a candidate, in the order of Candidate's fields.
_CANDIDATE = "id, priority, tenant_id, fairness_key, job_type, concurrency_key, scheduled_at"
assert _CANDIDATE.split(", ") == list(Candidate._fields), _CANDIDATE
_GROUP = (
    f"SELECT {_CANDIDATE} FROM jobs INDEXED BY jobs_fair WHERE {_DUE} "
    "AND priority = ? AND tenant_id = ? AND fairness_key = ? AND scheduled_at <= ? "
    "ORDER BY scheduled_at, id LIMIT ?"
)
# A group with types or keys held back is read type by type: a skip-scan of its types, then
# each type not held back, its held keys left out (only that type's jobs are walked for them).
_NEXT_TYPE = (
    f"SELECT job_type FROM jobs INDEXED BY jobs_fair_type WHERE {_DUE} "
    "AND priority = ? AND tenant_id = ? AND fairness_key = ? AND job_type > ? "
    "ORDER BY job_type LIMIT 1"
)
_TYPE_GROUP = (
    f"SELECT {_CANDIDATE} FROM jobs INDEXED BY jobs_fair_type WHERE {_DUE} "
    "AND priority = ? AND tenant_id = ? AND fairness_key = ? AND job_type = ? "
    "AND scheduled_at <= ?"
)


_ORDER = " ORDER BY scheduled_at, id LIMIT ?"


def _type_group_sql(keys: int, walk: int | None) -> str:
    """A type's oldest due jobs of a group, but those of ``keys`` keys left out: stepped
    over (no index seeks past a key), among the type's oldest ``walk`` (None: all)."""
    if not keys:
        return _TYPE_GROUP + _ORDER
    held = f"IFNULL(concurrency_key, '') NOT IN ({', '.join('?' * keys)})"
    if walk is None:
        return f"{_TYPE_GROUP} AND {held}{_ORDER}"
    return f"SELECT * FROM ({_TYPE_GROUP}{_ORDER}) WHERE {held}{_ORDER}"


def _candidate(row: tuple[Any, ...]) -> Candidate:
    job_id, priority, tenant, fairness, job_type, key, scheduled_at = row
    return Candidate(job_id, priority, tenant, fairness, job_type, key, from_millis(scheduled_at))


def _group(
    conn: sqlite3.Connection,
    group: tuple[int, str, str],
    due_by: int,
    per_group: int,
    exclude: Exclusions,
) -> list[Candidate]:
    """One (priority, tenant, fairness key) group's oldest ``per_group`` due jobs that
    ``exclude`` does not name."""
    types, keys = exclude.of_tenant(group[1])
    if not types and not keys:
        return [_candidate(row) for row in conn.execute(_GROUP, [*group, due_by, per_group])]
    held_keys: dict[str, list[str]] = {}
    for job_type, key in keys:
        held_keys.setdefault(job_type, []).append(key)
    out: list[Candidate] = []
    job_type = ""  # "" sorts before every type (none is empty)
    while (row := conn.execute(_NEXT_TYPE, [*group, job_type]).fetchone()) is not None:
        job_type = row[0]
        if job_type in types:
            continue
        skip = held_keys.get(job_type, [])
        walk = exclude.walk if skip else None
        params = [*group, job_type, due_by, *([] if walk is None else [walk]), *skip, per_group]
        sql = _type_group_sql(len(skip), walk)
        out.extend(_candidate(row) for row in conn.execute(sql, params))
    out.sort(key=lambda job: (job.scheduled_at, job.id))
    return out[:per_group]


class SQLiteFlowMixin(SQLiteConnection):
    """Flow control on the store's SQLite file."""

    async def fair_candidates(
        self, now: datetime, per_group: int, exclude: Exclusions | None = None
    ) -> list[Candidate]:
        due_by = _millis(now)
        exclude = exclude or Exclusions()

        def op(conn: sqlite3.Connection) -> list[Candidate]:
            out: list[Candidate] = []
            level = conn.execute(_TOP_LEVEL).fetchone()[0]
            while level is not None and len(out) < per_group:
                # "" sorts before every tenant (none is empty).
                group = conn.execute(_NEXT_TENANT, (level, "")).fetchone()
                while group is not None:
                    tenant, fairness = group
                    out.extend(_group(conn, (level, tenant, fairness), due_by, per_group, exclude))
                    key = conn.execute(_NEXT_KEY, (level, tenant, fairness)).fetchone()
                    if key is not None:
                        group = (tenant, key[0])
                    else:
                        group = conn.execute(_NEXT_TENANT, (level, tenant)).fetchone()
                level = conn.execute(_NEXT_LEVEL, (level,)).fetchone()[0]
            return out

        return await self._read(op, abandon_on_cancel=True)

    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        if not picks:
            return []
        fields = claim_fields(now)
        assignments = ", ".join(f"{_COLUMNS[f]} = ?" for f in fields)
        values = [_to_db(f, v) for f, v in fields.items()]
        due_by = _millis(now)
        # A pick with slots is one statement each; OR IGNORE: a pick whose slot another job
        # holds (the unique index) is skipped. The others go as one statement per chunk.
        one = (
            f"UPDATE OR IGNORE jobs SET {assignments}, key_slot = ?, type_slot = ? "
            f"WHERE id = ? AND {_BY_ID_DUE} RETURNING {_SELECT}"
        )
        free = [p.job_id for p in picks if not p.alone]
        alone = [p for p in picks if p.alone]

        def op(conn: sqlite3.Connection) -> list[Job]:
            claimed: dict[str, Job] = {}
            for chunk, marks in in_lists(free):
                many = (
                    f"UPDATE jobs SET {assignments} WHERE id IN {marks} "
                    f"AND {_BY_ID_DUE} RETURNING {_SELECT}"
                )
                for row in conn.execute(many, [*values, *chunk, due_by]):
                    job = _from_row(row)
                    claimed[job.id] = job
            for pick in alone:
                own = values
                if pick.start_at is not None:
                    own = [_to_db(f, v) for f, v in claim_fields(now, pick.start_at).items()]
                params = [*own, pick.key_slot, pick.type_slot, pick.job_id, due_by]
                row = conn.execute(one, params).fetchone()
                if row is not None:
                    claimed[pick.job_id] = _from_row(row)
            return [claimed[p.job_id] for p in picks if p.job_id in claimed]

        return await self._write(op, abandon_on_cancel=True)

    async def queued_by_type(self, now: datetime) -> dict[str, int]:
        sql = (
            "SELECT job_type, COUNT(*) FROM jobs INDEXED BY jobs_queued "
            f"WHERE {index_where(JobQuery(tenant_id=None, statuses=QUEUED))} "
            "AND queued_at <= ? GROUP BY job_type"
        )
        return await self._read(
            lambda conn: {t: int(n) for t, n in conn.execute(sql, (_millis(now),))}
        )

    async def held_slots(self) -> list[str]:
        sql = (
            "SELECT key_slot FROM jobs INDEXED BY jobs_key_slot WHERE key_slot IS NOT NULL "
            "UNION ALL "
            "SELECT type_slot FROM jobs INDEXED BY jobs_type_slot WHERE type_slot IS NOT NULL"
        )
        return await self._read(lambda conn: [row[0] for row in conn.execute(sql)])

    async def buckets(self, scopes: Sequence[str]) -> dict[str, datetime]:
        if not scopes:
            return {}
        sql = f"SELECT scope, tat FROM flow_buckets WHERE scope IN ({placeholders(len(scopes))})"

        def op(conn: sqlite3.Connection) -> dict[str, datetime]:
            return {
                scope: _EPOCH + timedelta(milliseconds=tat)
                for scope, tat in conn.execute(sql, list(scopes))
            }

        return await self._read(op)

    async def put_bucket(self, scope: str, expect: datetime | None, tat: datetime) -> bool:
        if expect is None:
            sql = "INSERT INTO flow_buckets (scope, tat) VALUES (?, ?) ON CONFLICT DO NOTHING"
            params: list[Any] = [scope, _millis(tat)]
        else:
            sql = "UPDATE flow_buckets SET tat = ? WHERE scope = ? AND tat = ?"
            params = [_millis(tat), scope, _millis(expect)]
        return bool(await self._write(lambda conn: conn.execute(sql, params).rowcount))

    async def limit_overrides(self, tenant_id: str | None = None) -> list[LimitOverride]:
        sql = "SELECT tenant_id, job_type, limits FROM flow_limits"
        params: list[Any] = []
        if tenant_id is not None:
            sql, params = sql + " WHERE tenant_id = ?", [tenant_id]
        sql += " ORDER BY tenant_id, job_type"

        def op(conn: sqlite3.Connection) -> list[LimitOverride]:
            return [
                LimitOverride(
                    tenant_id=tenant, job_type=job_type, limits=Limits.from_json(json.loads(text))
                )
                for tenant, job_type, text in conn.execute(sql, params)
            ]

        return await self._read(op)

    async def put_limit_override(self, override: LimitOverride) -> None:
        key = [override.tenant_id, override.job_type]
        if override.limits.empty:
            sql, params = "DELETE FROM flow_limits WHERE tenant_id = ? AND job_type = ?", key
        else:
            sql = (
                "INSERT INTO flow_limits (tenant_id, job_type, limits) VALUES (?, ?, ?) "
                "ON CONFLICT (tenant_id, job_type) DO UPDATE SET limits = excluded.limits"
            )
            params = [*key, json.dumps(override.limits.to_json())]
        await self._write(lambda conn: conn.execute(sql, params))

    async def tenant_weights(self) -> list[TenantWeight]:
        sql = "SELECT tenant_id, weight FROM flow_weights ORDER BY tenant_id"
        return await self._read(
            lambda conn: [TenantWeight(tenant_id=t, weight=w) for t, w in conn.execute(sql)]
        )

    async def put_tenant_weight(self, weight: TenantWeight) -> None:
        params: list[Any] = [weight.tenant_id]
        if weight.weight == 1:
            sql = "DELETE FROM flow_weights WHERE tenant_id = ?"
        else:
            sql = (
                "INSERT INTO flow_weights (tenant_id, weight) VALUES (?, ?) "
                "ON CONFLICT (tenant_id) DO UPDATE SET weight = excluded.weight"
            )
            params = [weight.tenant_id, weight.weight]
        await self._write(lambda conn: conn.execute(sql, params))

    async def put_flow_report(self, report: FlowReport) -> None:
        text = json.dumps(report.to_json())
        sql = (
            "INSERT INTO flow_report (id, report) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET report = excluded.report"
        )
        await self._write(lambda conn: conn.execute(sql, [text]))

    async def flow_report(self) -> FlowReport | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT report FROM flow_report WHERE id = 1").fetchone()
            return None if row is None else str(row[0])

        text = await self._read(op)
        return None if text is None else FlowReport.from_json(json.loads(text))
