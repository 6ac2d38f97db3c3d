"""The store's named predicates are defined once (:mod:`jobscheduler.store.query`) and
compiled by each adapter: these tests pin the definitions and the compiled forms the indexes
rely on. That
every adapter selects exactly the jobs a predicate matches is the contract suite's
(``tests/contract/test_store_predicates.py``)."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import attrs
import pytest

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.store.mongo.codec import job_filter
from jobscheduler.store.query import BUFFERED, DUE_ONE_OFF, DUE_TEMPLATE, PENDING, JobQuery
from jobscheduler.store.sqlite.codec import _millis
from jobscheduler.store.sqlite.where import PARTIAL_INDEXES, conditions, index_where

from .conftest import BASE, after, make_job, started_sqlite


@pytest.mark.parametrize(
    ("job", "due"),
    [
        (make_job(), True),
        (make_job(scheduled_at=after(1)), False),
        (make_job(cron="* * * * *"), False),
        (make_job(status=Status.QUEUED), False),
        (make_job(status=Status.CANCELLED), False),
    ],
    ids=["pending-due", "pending-later", "template", "queued", "cancelled"],
)
def test_a_due_one_off_job_is_pending_without_cron_and_scheduled_by_now(
    job: Job, due: bool
) -> None:
    assert DUE_ONE_OFF.due(BASE).matches(job) is due


def test_a_due_template_is_a_pending_template_scheduled_by_now() -> None:
    template = make_job(cron="* * * * *")
    assert DUE_TEMPLATE.due(BASE).matches(template)
    assert not DUE_TEMPLATE.due(BASE - timedelta(seconds=1)).matches(template)
    assert not DUE_TEMPLATE.due(BASE).matches(make_job())
    assert not DUE_TEMPLATE.due(BASE).matches(make_job(cron="* * * * *", status=Status.PAUSED))
    assert PENDING.matches(template)
    assert PENDING.matches(make_job(scheduled_at=after(60)))
    assert BUFFERED.matches(attrs.evolve(template, cron_buffered=BASE))
    assert not BUFFERED.matches(template)


def test_sqlite_compiles_the_due_predicates_to_the_terms_of_their_partial_indexes() -> None:
    terms, params = conditions(DUE_ONE_OFF.due(BASE), _millis)
    assert terms == ["status = 'pending'", "cron IS NULL", "scheduled_at <= ?"]
    assert params == [_millis(BASE)]
    assert index_where(DUE_ONE_OFF) == "status = 'pending' AND cron IS NULL"
    assert index_where(DUE_TEMPLATE) == "status = 'pending' AND cron IS NOT NULL"
    assert PARTIAL_INDEXES["jobs_claim"][1] is DUE_ONE_OFF
    assert PARTIAL_INDEXES["jobs_templates_due"][1] is DUE_TEMPLATE
    assert index_where(PARTIAL_INDEXES["jobs_in_flight"][1]) == ("status IN ('claimed', 'running')")


def test_mongo_compiles_the_due_predicates_to_equalities_and_ranges() -> None:
    assert job_filter(DUE_ONE_OFF.due(BASE)) == {
        "status": "pending",
        "cron": None,
        "scheduledAt": {"$lte": BASE},
    }
    assert job_filter(DUE_TEMPLATE.of_tenant("t").due(BASE)) == {
        "tenantId": "t",
        "status": "pending",
        "cron": {"$gt": ""},
        "scheduledAt": {"$lte": BASE},
    }
    assert job_filter(JobQuery(tenant_id=None, statuses=states.UNFINISHED)) == {
        "status": {"$in": ["claimed", "pending", "queued", "running", "waiting"]},
    }


async def test_a_partial_index_made_under_another_where_is_rebuilt_at_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    store = await started_sqlite(path)
    await store.close()
    # An older release wrote the queued sweep's index as ``IN ('queued')``: SQLite does not
    # use it for a query that says ``status = 'queued'`` (nor the other way round).
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX jobs_queued")
        conn.execute("CREATE INDEX jobs_queued ON jobs (queued_at) WHERE status IN ('queued')")
    conn.close()

    store = await started_sqlite(path)
    try:
        await store.insert(attrs.evolve(make_job(status=Status.QUEUED), queued_at=BASE))
        stale = await store.find_stale([Status.QUEUED], "queued_at", after(60), 10)
    finally:
        await store.close()
    assert len(stale) == 1
    with sqlite3.connect(path) as conn:
        [(sql,)] = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs_queued'")
    conn.close()
    assert sql.endswith("WHERE status = 'queued'")
