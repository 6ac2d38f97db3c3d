"""A file made before workflow records stored their number of steps gains it at start."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from jobscheduler.domain.workflows import parse_workflow_request
from jobscheduler.handlers import default_registry

from .conftest import started_sqlite
from .workflow_support import chain, workflow_body

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def test_an_older_files_records_are_counted_and_a_lean_read_gives_the_count(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    made = parse_workflow_request(
        workflow_body(chain("abc")), now=NOW, job_types=default_registry().validators()
    )
    store = await started_sqlite(path)
    await store.insert_workflow(made.workflow)
    await store.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE workflows DROP COLUMN step_count")
    conn.commit()
    conn.close()

    for _ in range(2):  # the second start finds nothing left to migrate
        store = await started_sqlite(path)
        try:
            lean = await store.get_workflow(made.workflow.id, steps=False)
            assert (lean.steps, lean.step_count) == ((), 3)
            assert await store.get_workflow(made.workflow.id) == made.workflow
        finally:
            await store.close()
