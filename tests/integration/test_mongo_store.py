"""MongoJobStore behaviour beyond the shared store contract, against a real server: start
and indexes, and the documents it writes.

The server is ``MONGO_URI`` (default ``mongodb://127.0.0.1:27017``: FerretDB from
``scripts/deps.sh up``, or a real MongoDB). Nothing here skips: an unreachable server fails
every test. Batches are in test_mongo_store_batches.py, lost requests and replies in
test_mongo_store_faults.py, the server semantics its queries rely on in
test_mongo_server_semantics.py; the ``database`` and ``store`` fixtures are in conftest.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs
import pymongo
import pytest
import trio
from bson import ObjectId

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Replay, Status
from jobscheduler.errors import StoreError, ValidationError
from jobscheduler.store.mongo.attempts import ATTEMPTS_COLLECTION, attempt_to_document
from jobscheduler.store.mongo.store import CLAIM_FIELD, FIELDS, INDEXES, MongoJobStore
from jobscheduler.testing import free_port
from tests.contract.store_fixtures import mongo_uri, unique_database_name
from tests.contract.store_support import NOW, make_job
from tests.support.mongo import raw

pytestmark = pytest.mark.integration


def _index_keys(index: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(field, int(direction)) for field, direction in index["key"].items()]


# ---------------------------------------------------------------------------- lifecycle


async def test_start_creates_every_index(store: MongoJobStore, database: str) -> None:
    existing = {
        ix["name"]: ix for ix in await raw(mongo_uri(), database, lambda c: c.list_indexes())
    }
    for model in INDEXES:
        wanted = model.document
        assert wanted["name"] in existing, f"index {wanted['name']} missing"
        found = existing[wanted["name"]]
        assert _index_keys(found) == _index_keys(wanted)
        assert bool(found.get("unique")) == bool(wanted.get("unique"))
    unique = existing["tenant_idempotencyKey_unique"]
    assert _index_keys(unique) == [("tenantId", 1), ("idempotencyKey", 1)]
    assert unique.get("unique") is True
    assert "idempotencyKey_unique" not in existing


async def test_start_is_idempotent_on_one_store_and_across_stores(
    store: MongoJobStore, database: str
) -> None:
    before = sorted(
        ix["name"] for ix in await raw(mongo_uri(), database, lambda c: c.list_indexes())
    )
    job = await store.insert(make_job())
    await store.start()  # the same store again: a no-op
    second = MongoJobStore(mongo_uri(), database)
    await second.start()  # another process starting on an existing database
    try:
        await second.start()
        assert await second.get(job.id) == job
    finally:
        await second.close()
        await second.close()  # closing twice is fine too
    after = sorted(
        ix["name"] for ix in await raw(mongo_uri(), database, lambda c: c.list_indexes())
    )
    assert after == before


async def test_an_index_nothing_reads_any_more_is_dropped_at_start(database: str) -> None:
    """The finished-per-minute index of older releases costs every transition a write."""
    await raw(
        mongo_uri(),
        database,
        lambda jobs: jobs.create_index([("status", 1), ("updatedAt", 1)], name="status_updatedAt"),
    )
    store = MongoJobStore(mongo_uri(), database)
    await store.start()
    try:
        names = await raw(mongo_uri(), database, lambda jobs: list(jobs.index_information()))
        assert "status_updatedAt" not in names
        assert "status_createdAt" in names
        job = await store.insert(make_job())
        assert await store.get(job.id) == job
    finally:
        await store.close()


async def test_unreachable_server_fails_with_store_error_within_the_timeout() -> None:
    port = free_port()  # nothing listens on it
    store = MongoJobStore(f"mongodb://127.0.0.1:{port}", "unused", server_selection_timeout=0.5)
    started = trio.current_time()
    with trio.fail_after(5), pytest.raises(StoreError) as info:
        await store.start()
    assert trio.current_time() - started < 3.0
    assert not isinstance(info.value, pymongo.errors.PyMongoError)
    assert isinstance(info.value.__cause__, pymongo.errors.ServerSelectionTimeoutError)
    await store.close()  # nothing to close, still fine


async def test_calls_before_start_raise_store_error() -> None:
    store = MongoJobStore(mongo_uri(), unique_database_name())
    with pytest.raises(StoreError):
        await store.get(str(ObjectId()))
    with pytest.raises(StoreError):
        await store.claim_due(NOW, 10)


# ---------------------------------------------------------------------------- documents


async def test_documents_use_object_ids_camel_case_fields_and_bson_dates(
    store: MongoJobStore, database: str
) -> None:
    job = await store.insert(make_job(key="shape"))
    [claimed] = await store.claim_due(NOW, 1)
    doc = await raw(mongo_uri(), database, lambda c: c.find_one({"_id": ObjectId(job.id)}))
    assert doc["_id"] == ObjectId(job.id)
    # Every field, but the run identity ones (left out of jobs that are not cron runs) and
    # the flow slots (left out of jobs that hold none: their unique indexes are sparse),
    # and the mark of the claim's batch.
    left_out = {"templateId", "fireAt", "keySlot", "typeSlot"}
    assert set(doc) == set(FIELDS.values()) - left_out | {CLAIM_FIELD}
    assert doc["idempotencyKey"] == "shape"
    assert doc["status"] == "queued"
    for field in ("scheduledAt", "queuedAt", "createdAt", "updatedAt"):
        assert isinstance(doc[field], datetime)
        assert doc[field] == NOW
    assert doc["claimToken"] is None
    assert claimed.queued_at == NOW


async def test_a_missing_optional_field_reads_as_none_and_matches_a_none_expectation(
    store: MongoJobStore, database: str
) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    # Documents written by other tools may omit null fields altogether.
    await raw(
        mongo_uri(),
        database,
        lambda c: c.update_one(
            {"_id": ObjectId(job.id)}, {"$unset": {"claimToken": "", "lastError": ""}}
        ),
    )
    loaded = await store.get(job.id)
    assert loaded.claim_token is None
    assert loaded.last_error is None
    change = states.Change(
        transition="test",
        job_id=job.id,
        expect={"status": Status.QUEUED, "claim_token": None},
        set={"last_error": "seen"},
    )
    updated = await store.apply(change)
    assert updated is not None
    assert updated.last_error == "seen"


async def test_a_payload_the_server_cannot_store_is_a_validation_error_not_a_driver_error(
    store: MongoJobStore,
) -> None:
    # MongoDB 5+ stores dotted keys inside documents; FerretDB v1 rejects them.
    job = make_job(payload={"a.b": 1})
    if store.is_ferretdb:
        with pytest.raises(ValidationError, match=r"a\.b"):
            await store.insert(job)
    else:
        await store.insert(job)
        assert await store.get(job.id) == job


async def test_insert_many_maps_an_unstorable_document_to_its_index(
    store: MongoJobStore,
) -> None:
    # The unordered insert_many stores the others; the refused one answers at its index.
    jobs = [make_job(), make_job(payload={"a.b": 1}), make_job()]
    outcomes = await store.insert_many(jobs)
    assert outcomes[0] == jobs[0]
    assert outcomes[2] == jobs[2]
    if store.is_ferretdb:
        assert isinstance(outcomes[1], ValidationError)
        assert "a.b" in str(outcomes[1])
    else:
        assert outcomes[1] == jobs[1]
    assert await store.get(jobs[2].id) == jobs[2]


async def test_an_attempt_record_from_before_runs_reads_as_run_0_and_sorts_first(
    store: MongoJobStore, database: str
) -> None:
    job = await store.insert(make_job())
    for run, message in ((1, "second run"), (0, "first run")):
        running = attrs.evolve(
            job,
            status=Status.RUNNING,
            attempts=1,
            replays=(Replay(at=NOW, previous_status=Status.DLQ, run=run),) if run else (),
        )
        record = states.attempt_record(running, outcome=Outcome.FAILED, now=NOW)
        document = attempt_to_document(attrs.evolve(record, error_message=message))
        if run == 0:
            del document["run"]  # written before runs were numbered
        await raw(
            mongo_uri(),
            database,
            lambda jobs, document=document: jobs.database[ATTEMPTS_COLLECTION].insert_one(document),
        )
    records = await store.attempts(job.id)
    assert [(r.run, r.number, r.error_message) for r in records] == [
        (0, 1, "first run"),
        (1, 1, "second run"),
    ]


async def test_a_result_is_stored_as_json_text_beside_a_document_payload(
    store: MongoJobStore, database: str
) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    assert await store.apply(states.pick(job.id, worker="w", token="t", now=NOW))
    running = await store.apply(states.start(job.id, token="t", now=NOW))
    assert running is not None
    result = {"a.b": 1, "$x": [2**70]}  # neither a storable sub-document nor a BSON int
    assert await store.apply(states.complete(running, token="t", now=NOW, result=result))
    doc = await raw(mongo_uri(), database, lambda c: c.find_one({"_id": ObjectId(job.id)}))
    assert doc[FIELDS["result"]] == '{"a.b":1,"$x":[1180591620717411303424]}'
    assert (await store.get(job.id)).result == result


async def test_serializes_conditional_writes_only_on_a_stock_ferretdb(
    store: MongoJobStore,
) -> None:
    assert store.serializes_writes is (store.is_ferretdb and not store.is_atomic_ferretdb)


async def test_the_test_stack_runs_the_ferretdb_build_with_atomic_writes(
    store: MongoJobStore,
) -> None:
    # scripts/deps.sh builds FerretDB with scripts/ferretdb/*.patch; without it, the claim
    # and failover tests of several processes would race on a non-atomic server.
    if store.is_ferretdb:
        assert store.is_atomic_ferretdb, store.server_info["ferretdbVersion"]
