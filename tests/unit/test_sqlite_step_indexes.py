"""The SQLite steps' indexes: keyed on ``finished_at`` (or the age) rather than the status,
so a step's claim and start leave them alone (a fan-out's children moved them four times
each); every read of a workflow's steps and of a spawner's children seeks its index, a
page of children by age without a sort; a file whose indexes were keyed on the status has
them rebuilt at start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jobscheduler.domain.model import Status, new_job_id
from jobscheduler.domain.workflows import OUTCOMES, UNFINISHED_STEPS
from jobscheduler.roles.workflows.settle import FAILED_ENDS
from jobscheduler.store.query import JobQuery
from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.store.sqlite.where import finished_term

from .conftest import BASE, file_altered, started_sqlite
from .test_sqlite_plans import _plans, _traced


def test_the_finished_term_follows_whether_every_status_is_final_or_none_is() -> None:
    assert finished_term(UNFINISHED_STEPS) == ["finished_at IS NULL"]
    assert finished_term(FAILED_ENDS) == ["finished_at IS NOT NULL"]
    assert finished_term((Status.COMPLETED,)) == ["finished_at IS NOT NULL"]
    assert finished_term((Status.WAITING, Status.COMPLETED)) == []


async def test_the_reads_of_steps_seek_the_steps_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = _traced(monkeypatch)
    store = await started_sqlite(tmp_path / "traced.db")
    workflow, spawner = new_job_id(), new_job_id()
    try:
        for statuses, _ in OUTCOMES:
            await store.any_job(JobQuery(tenant_id=None, workflow_id=workflow, statuses=statuses))
        for statuses in (UNFINISHED_STEPS, FAILED_ENDS):
            await store.any_job(JobQuery(tenant_id=None, spawned_by=spawner, statuses=statuses))
        for status in (Status.WAITING, Status.COMPLETED):
            query = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(status,))
            await store.find_jobs(query, 100)
        await store.workflow_steps(workflow)
        await store.release_spawned(spawner, BASE, 500)
    finally:
        await store.close()

    reads = [sql for sql in dict.fromkeys(statements) if workflow in sql or spawner in sql]
    assert len(reads) == 9, reads  # three outcome probes, four of children, steps, release
    for sql, plan in _plans(tmp_path / "traced.db", reads):
        if workflow in sql:
            index = "jobs_workflow"
        else:
            index = "jobs_spawned_pages" if "ORDER BY" in sql else "jobs_spawned"
        assert f"INDEX {index} (" in plan, (sql, plan)
        assert "TEMP B-TREE" not in plan or "ORDER BY created_at, id" in sql, (sql, plan)


async def test_a_file_whose_steps_indexes_were_keyed_on_the_status_has_them_rebuilt(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    await file_altered(
        path,
        "DROP INDEX jobs_workflow; DROP INDEX jobs_spawned;"
        "CREATE INDEX jobs_workflow ON jobs (workflow_id, status) WHERE workflow_id IS NOT NULL;"
        "CREATE INDEX jobs_spawned ON jobs (spawned_by, status, created_at DESC, id DESC)"
        " WHERE spawned_by IS NOT NULL;",
    )

    store = SQLiteJobStore(path)
    await store.start()
    await store.close()

    conn = sqlite3.connect(path)
    found = dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE name IN ('jobs_workflow', 'jobs_spawned')"
        ).fetchall()
    )
    conn.close()
    assert "(workflow_id, finished_at)" in found["jobs_workflow"]
    assert "(spawned_by, finished_at)" in found["jobs_spawned"]
