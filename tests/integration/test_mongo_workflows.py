"""MongoDB specifics of workflow records: those stored before their number of steps was
stored beside the steps gain it at start."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from bson import ObjectId

from jobscheduler.domain.workflows import parse_workflow_request
from jobscheduler.handlers import default_registry
from jobscheduler.store.mongo import MongoJobStore
from jobscheduler.store.mongo.workflows import WORKFLOWS_COLLECTION
from tests.contract.store_fixtures import mongo_uri
from tests.support.mongo import raw
from tests.unit.workflow_support import chain, workflow_body

pytestmark = pytest.mark.integration

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def test_records_stored_without_their_step_count_are_counted_at_start(
    database: str,
) -> None:
    made = parse_workflow_request(
        workflow_body(chain("abc")), now=NOW, job_types=default_registry().validators()
    )
    store = MongoJobStore(mongo_uri(), database)
    await store.start()
    try:
        await store.insert_workflow(made.workflow)
    finally:
        await store.close()

    def uncount(jobs: Any) -> None:
        records = jobs.database[WORKFLOWS_COLLECTION]
        records.update_one({"_id": ObjectId(made.workflow.id)}, {"$unset": {"stepCount": ""}})

    await raw(mongo_uri(), database, uncount)
    for _ in range(2):  # the second start finds nothing left to count
        store = MongoJobStore(mongo_uri(), database)
        await store.start()
        try:
            lean = await store.get_workflow(made.workflow.id, steps=False)
            assert (lean.steps, lean.step_count) == ((), 3)
            assert await store.get_workflow(made.workflow.id) == made.workflow
        finally:
            await store.close()
