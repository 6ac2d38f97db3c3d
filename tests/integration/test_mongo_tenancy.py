"""MongoDB specifics of tenancy: a database indexed before tenancy is migrated at start."""

from __future__ import annotations

import pymongo
import pytest

from jobscheduler.domain.audit import AuditRecord, new_record
from jobscheduler.errors import DuplicateJob
from jobscheduler.store.mongo import MongoJobStore
from tests.contract.store_fixtures import mongo_uri
from tests.support.mongo import raw
from tests.unit.conftest import make_job

pytestmark = pytest.mark.integration


async def test_the_global_key_index_of_older_releases_is_replaced_at_start(
    database: str,
) -> None:
    await raw(
        mongo_uri(),
        database,
        lambda jobs: jobs.create_index(
            [("idempotencyKey", 1)], name="idempotencyKey_unique", unique=True
        ),
    )
    store = MongoJobStore(mongo_uri(), database)
    await store.start()
    try:
        names = await raw(mongo_uri(), database, lambda jobs: list(jobs.index_information()))
        assert "idempotencyKey_unique" not in names
        assert "tenant_idempotencyKey_unique" in names
        await store.insert(make_job(key="shared", tenant="acme"))
        await store.insert(make_job(key="shared", tenant="other"))
        with pytest.raises(DuplicateJob):
            await store.insert(make_job(key="shared", tenant="acme"))
    finally:
        await store.close()
    # Starting again (nothing left to migrate) is harmless.
    again = MongoJobStore(mongo_uri(), database)
    await again.start()
    await again.close()


class _AuditDown(MongoJobStore):
    """The real store, whose audit collection refuses every write."""

    def _insert_audit(self, record: AuditRecord) -> None:
        raise pymongo.errors.WriteError("audit collection unavailable")


async def test_an_audit_record_not_written_after_its_job_is_counted_and_the_job_stays(
    database: str,
) -> None:
    failures: list[int] = []
    store = _AuditDown(mongo_uri(), database, on_audit_failure=lambda: failures.append(1))
    await store.start()
    try:
        job = make_job(tenant="acme")
        record = new_record(
            now=job.created_at,
            key_id="k1",
            tenant="acme",
            action="POST /jobs",
            status=201,
            job_id=job.id,
        )
        assert await store.insert(job, audit=record) == job
        assert failures == [1]
        assert (await store.get(job.id)).id == job.id
        await store.insert(make_job(tenant="acme"))  # no record given: nothing to count
        assert failures == [1]
    finally:
        await store.close()
