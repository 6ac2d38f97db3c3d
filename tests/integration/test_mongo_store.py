"""MongoJobStore behaviour beyond the shared store contract, against a real server.

The server is ``MONGO_URI`` (default ``mongodb://127.0.0.1:27017``: FerretDB from
``scripts/deps.sh up``, or a real MongoDB). Nothing here skips: an unreachable server fails
every test. Lost requests and replies are provoked with a small TCP proxy between the store
and the server that drops one chosen request, or swallows the server's reply to it after the
server has executed it, and then cuts the connection.
"""

from __future__ import annotations

import random
import re
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

import pymongo
import pytest
import trio
from bson import ObjectId

from jobscheduler import states
from jobscheduler.errors import StoreError, ValidationError
from jobscheduler.model import Job, Status
from jobscheduler.store.mongo import (
    CLAIM_FIELD,
    COLLECTION,
    FIELDS,
    INDEXES,
    Document,
    MongoJobStore,
)
from jobscheduler.store.mongo_batch import (
    MAX_CHUNK_BYTES,
    MAX_STATEMENTS,
    chunks,
    marked,
    new_mark,
    statement_size,
)
from jobscheduler.store.mongo_codec import chain, change_filter, update_document
from tests.contract.store_fixtures import drop_database, mongo_uri, unique_database_name
from tests.contract.test_store_contract import NOW, make_job

pytestmark = pytest.mark.integration

# A command's name is the first element of its OP_MSG body: BSON string type, key, NUL.
FIND_AND_MODIFY = b"\x02findAndModify\x00"
INSERT = b"\x02insert\x00"
UPDATE = b"\x02update\x00"


def _server_address(uri: str) -> tuple[str, int]:
    host, port = pymongo.uri_parser.parse_uri(uri)["nodelist"][0]
    return host, port


def _via(uri: str, port: int) -> str:
    """``uri`` with its host list replaced by the proxy (and a direct connection to it)."""
    match = re.match(r"^mongodb://(?:([^@/]*)@)?([^/?]*)(/[^?]*)?(?:\?(.*))?$", uri)
    if match is None:
        raise ValueError(f"the fault-injection tests need a mongodb:// URI, got {uri!r}")
    userinfo, _hosts, path, query = match.groups()
    options = [opt for opt in (query or "").split("&") if opt and "replicaSet" not in opt]
    options.append("directConnection=true")
    auth = f"{userinfo}@" if userinfo else ""
    return f"mongodb://{auth}127.0.0.1:{port}{path or '/'}?{'&'.join(options)}"


class FaultProxy:
    """TCP proxy to the server that can lose one request, or one reply, on purpose."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._rule: tuple[bytes, Literal["request", "reply"]] | None = None
        self.fired = trio.Event()
        self._scope = trio.CancelScope()
        self._flowing = trio.Event()
        self._flowing.set()

    def freeze(self) -> None:
        """Hold every byte in both directions (a SIGSTOPped server) until :meth:`thaw`."""
        self._flowing = trio.Event()

    def thaw(self) -> None:
        self._flowing.set()

    def lose_next(self, marker: bytes, what: Literal["request", "reply"]) -> None:
        """Lose the next request containing ``marker`` (never sent), or its reply (sent,
        executed, reply swallowed); either way the client's connection is then cut."""
        self._rule, self.fired = (marker, what), trio.Event()

    def stop(self) -> None:
        """Close the listener and every connection: the server looks down."""
        self._scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        with self._scope:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            task_status.started(listeners[0].socket.getsockname()[1])
            await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        swallow = False
        try:
            async with (
                client,
                await trio.open_tcp_stream(*self._upstream) as upstream,
                trio.open_nursery() as nursery,
            ):

                async def requests() -> None:
                    nonlocal swallow
                    while chunk := await client.receive_some(1 << 16):
                        await self._flowing.wait()
                        rule = self._rule
                        if rule is not None and rule[0] in chunk:
                            self._rule = None
                            if rule[1] == "request":
                                self.fired.set()
                                break
                            swallow = True
                        await upstream.send_all(chunk)
                    nursery.cancel_scope.cancel()

                async def replies() -> None:
                    while chunk := await upstream.receive_some(1 << 16):
                        await self._flowing.wait()
                        if swallow:
                            self.fired.set()
                            break
                        await client.send_all(chunk)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(requests)
                nursery.start_soon(replies)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


async def _raw(uri: str, database: str, fn: Any) -> Any:
    """Run ``fn(collection)`` with a separate plain client (to look behind the store)."""

    def call() -> Any:
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            uri, serverSelectionTimeoutMS=5000, tz_aware=True
        )
        try:
            return fn(client[database][COLLECTION])
        finally:
            client.close()

    return await trio.to_thread.run_sync(call)


@pytest.fixture
async def database() -> AsyncIterator[str]:
    name = unique_database_name("js_mongo")
    try:
        yield name
    finally:
        await drop_database(mongo_uri(), name)


@pytest.fixture
async def store(database: str) -> AsyncIterator[MongoJobStore]:
    store = MongoJobStore(mongo_uri(), database)
    await store.start()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def proxy(nursery: trio.Nursery) -> AsyncIterator[tuple[FaultProxy, str]]:
    """A fault proxy in front of the server, and the store URI that goes through it."""
    fault_proxy = FaultProxy(_server_address(mongo_uri()))
    port = await nursery.start(fault_proxy.run)
    yield fault_proxy, _via(mongo_uri(), port)
    fault_proxy.stop()


@pytest.fixture(params=[None, False], ids=["claim-default", "claim-update-many"])
async def proxied_store(
    request: pytest.FixtureRequest, proxy: tuple[FaultProxy, str], database: str
) -> AsyncIterator[tuple[MongoJobStore, FaultProxy]]:
    # Claims go as one update_many on MongoDB and as statements per job on FerretDB (the
    # default there): both ways are run against the test server.
    fault_proxy, uri = proxy
    store = MongoJobStore(
        uri, database, server_selection_timeout=5.0, socket_timeout=5.0, claim_each=request.param
    )
    await store.start()
    try:
        yield store, fault_proxy
    finally:
        await store.close()


def _index_keys(index: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(field, int(direction)) for field, direction in index["key"].items()]


# ---------------------------------------------------------------------------- lifecycle


async def test_start_creates_every_index(store: MongoJobStore, database: str) -> None:
    existing = {
        ix["name"]: ix for ix in await _raw(mongo_uri(), database, lambda c: c.list_indexes())
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
        ix["name"] for ix in await _raw(mongo_uri(), database, lambda c: c.list_indexes())
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
        ix["name"] for ix in await _raw(mongo_uri(), database, lambda c: c.list_indexes())
    )
    assert after == before


async def test_unreachable_server_fails_with_store_error_within_the_timeout() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
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


async def test_server_going_away_gives_store_error_within_the_timeout(
    proxy: tuple[FaultProxy, str], database: str
) -> None:
    fault_proxy, uri = proxy
    store = MongoJobStore(uri, database, server_selection_timeout=0.5)
    await store.start()
    try:
        job = await store.insert(make_job())
        fault_proxy.stop()
        for call in (
            lambda: store.get(job.id),
            lambda: store.apply(states.pick(job.id, worker="w", token="t", now=NOW)),
            lambda: store.claim_due(NOW, 10),
            lambda: store.insert(make_job()),
        ):
            started = trio.current_time()
            with trio.fail_after(10), pytest.raises(StoreError):
                await call()
            assert trio.current_time() - started < 5.0
    finally:
        await store.close()


# ---------------------------------------------------------------------------- documents


async def test_documents_use_object_ids_camel_case_fields_and_bson_dates(
    store: MongoJobStore, database: str
) -> None:
    job = await store.insert(make_job(key="shape"))
    [claimed] = await store.claim_due(NOW, 1)
    doc = await _raw(mongo_uri(), database, lambda c: c.find_one({"_id": ObjectId(job.id)}))
    assert doc["_id"] == ObjectId(job.id)
    # Every field, but the run identity ones (left out of jobs that are not cron runs), and
    # the mark of the claim's batch.
    assert set(doc) == set(FIELDS.values()) - {"templateId", "fireAt"} | {CLAIM_FIELD}
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
    await _raw(
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
    doc = await _raw(mongo_uri(), database, lambda c: c.find_one({"_id": ObjectId(job.id)}))
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


def _sorted(docs: list[Document], sort: list[tuple[str, int]]) -> list[Document]:
    """``docs`` in MongoDB's order for ``sort`` on fields of one type each: a missing or
    null value sorts below every value."""
    ordered = list(docs)
    for field, direction in reversed(sort):  # stable sorts, least significant key first
        present = [d for d in ordered if d.get(field) is not None]
        absent = [d for d in ordered if d.get(field) is None]
        present.sort(key=lambda d: d[field], reverse=direction < 0)
        ordered = absent + present if direction > 0 else present + absent
    return ordered


async def test_filtered_sorted_and_limited_finds_follow_mongodb_semantics(database: str) -> None:
    """What the store's queries rely on, checked against answers computed here: on the test
    stack, FerretDB evaluates these filters, sorts and limits in SQLite (the patch's changes
    3 and 5), where JSON comparisons could easily differ from MongoDB's."""
    rng = random.Random(7)
    base = NOW.replace(microsecond=0)
    docs: list[Document] = []
    for _ in range(600):
        doc: Document = {
            "_id": ObjectId(),
            "tenantId": rng.choice(["a", "b", "c"]),
            "priority": rng.randint(-3, 3),
            "weight": rng.random() * 5,
            "status": rng.choice(["pending", "queued", "completed"]),
            "scheduledAt": base + timedelta(seconds=rng.randint(-100, 100)),
            "key": f"k{rng.randint(0, 10_000):05d}",
        }
        if (roll := rng.random()) < 0.1:
            doc["cron"] = "* * * * *"
        elif roll < 0.5:
            doc["cron"] = None
        if rng.random() < 0.5:
            doc["queuedAt"] = base + timedelta(seconds=rng.randint(-60, 0))
        docs.append(doc)
    due = base
    cases: list[tuple[Document, Callable[[Document], bool], list[tuple[str, int]], int]] = [
        (
            {"status": "pending", "cron": None, "scheduledAt": {"$lte": due}},
            lambda d: (
                d["status"] == "pending" and d.get("cron") is None and d["scheduledAt"] <= due
            ),
            [("priority", -1), ("scheduledAt", 1), ("_id", 1)],
            20,
        ),
        (
            {"status": "pending", "cron": {"$ne": None}, "scheduledAt": {"$lte": due}},
            lambda d: (
                d["status"] == "pending" and d.get("cron") is not None and d["scheduledAt"] <= due
            ),
            [("scheduledAt", 1), ("_id", 1)],
            10,
        ),
        (
            {"status": "queued"},
            lambda d: d["status"] == "queued",
            [("queuedAt", 1), ("_id", 1)],
            50,
        ),
        (
            {"tenantId": "b", "weight": {"$gt": 1.5, "$lte": 4}},
            lambda d: d["tenantId"] == "b" and 1.5 < d["weight"] <= 4,
            [("weight", -1), ("_id", -1)],
            25,
        ),
        (
            {"key": {"$gte": "k05000"}, "priority": {"$lt": 0}},
            lambda d: d["key"] >= "k05000" and d["priority"] < 0,
            [("key", 1), ("_id", 1)],
            30,
        ),
        (
            {"queuedAt": {"$gt": due - timedelta(seconds=30)}},
            lambda d: d.get("queuedAt") is not None and d["queuedAt"] > due - timedelta(seconds=30),
            [("queuedAt", -1), ("_id", 1)],
            15,
        ),
    ]

    def run(collection: Any) -> list[tuple[list[Any], list[Any]]]:
        collection.insert_many(docs)
        results = []
        for query, matches, sort, limit in cases:
            got = [d["_id"] for d in collection.find(query, sort=sort, limit=limit)]
            expected = _sorted([d for d in docs if matches(d)], sort)[:limit]
            results.append((got, [d["_id"] for d in expected]))
        return results

    results = await _raw(mongo_uri(), database, run)
    for (query, *_), (got, expected) in zip(cases, results, strict=True):
        assert got == expected, query


@pytest.mark.parametrize("claim_each", [True, False], ids=["statement-each", "update-many"])
async def test_concurrent_claimers_take_the_highest_priority_first_and_never_share_a_job(
    database: str, claim_each: bool
) -> None:
    # Two stores (two clients, as two scheduler processes would have), three claimers each.
    store = MongoJobStore(mongo_uri(), database, claim_each=claim_each)
    other = MongoJobStore(mongo_uri(), database, claim_each=claim_each)
    await store.start()
    await other.start()
    try:
        high = await store.insert(make_job(priority=5))
        for i in range(40):
            await store.insert(make_job(priority=i % 3))
        first = await store.claim_due(NOW, 1)
        assert [j.id for j in first] == [high.id]
        claimed: list[str] = []

        async def claimer(claiming: MongoJobStore) -> None:
            # A batch comes back short (even empty) when others took its candidates first;
            # whoever took them keeps going, so all 40 are claimed in the end.
            while batch := await claiming.claim_due(NOW, 3):
                assert [j.priority for j in batch] == sorted(
                    (j.priority for j in batch), reverse=True
                )
                claimed.extend(j.id for j in batch)

        async with trio.open_nursery() as nursery:
            for claiming in (store, other) * 3:
                nursery.start_soon(claimer, claiming)
        assert len(claimed) == 40
        assert len(set(claimed)) == 40
    finally:
        await store.close()
        await other.close()


# ---------------------------------------------------------------------------- lost replies


async def test_apply_whose_reply_was_lost_returns_the_job_it_updated(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    fault_proxy.lose_next(FIND_AND_MODIFY, "reply")
    picked = await store.apply(states.pick(job.id, worker="w1", token="t1", now=NOW))
    assert fault_proxy.fired.is_set()
    assert picked is not None
    assert picked.status is Status.CLAIMED
    assert picked.claim_token == "t1"
    # The write is not applied twice and a second picker still loses.
    assert await store.apply(states.pick(job.id, worker="w2", token="t2", now=NOW)) is None


async def test_apply_whose_request_was_lost_is_sent_again(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    fault_proxy.lose_next(FIND_AND_MODIFY, "request")
    picked = await store.apply(states.pick(job.id, worker="w1", token="t1", now=NOW))
    assert fault_proxy.fired.is_set()
    assert picked is not None
    assert picked.claim_token == "t1"
    assert (await store.get(job.id)).claim_token == "t1"


async def test_apply_that_lost_the_race_still_returns_none_after_a_lost_reply(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    job = await store.insert(make_job())  # pending: a pick's expectation does not hold
    fault_proxy.lose_next(FIND_AND_MODIFY, "reply")
    assert await store.apply(states.pick(job.id, worker="w", token="t", now=NOW)) is None
    assert fault_proxy.fired.is_set()
    assert (await store.get(job.id)).status is Status.PENDING


async def test_insert_whose_reply_was_lost_returns_the_job_not_a_duplicate(
    proxied_store: tuple[MongoJobStore, FaultProxy], database: str
) -> None:
    store, fault_proxy = proxied_store
    job = make_job(key="once")
    fault_proxy.lose_next(INSERT, "reply")
    assert await store.insert(job) == job
    assert fault_proxy.fired.is_set()
    count = await _raw(
        mongo_uri(), database, lambda c: c.count_documents({"idempotencyKey": "once"})
    )
    assert count == 1


async def test_claim_whose_reply_was_lost_neither_loses_nor_doubles_a_job(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = [await store.insert(make_job(priority=p)) for p in (3, 2, 1)]
    # The claim's one update_many lands, its reply is lost: the read-back by the batch's
    # mark still finds exactly the jobs it moved, in claim order.
    fault_proxy.lose_next(UPDATE, "reply")
    claimed = await store.claim_due(NOW, 10)
    assert fault_proxy.fired.is_set()
    assert [j.id for j in claimed] == [j.id for j in jobs]
    assert all(j.status is Status.QUEUED for j in claimed)
    assert await store.claim_due(NOW, 10) == []


async def test_claim_whose_request_was_lost_claims_nothing_and_leaves_the_jobs_due(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = [await store.insert(make_job(priority=p)) for p in (2, 1)]
    fault_proxy.lose_next(UPDATE, "request")
    assert await store.claim_due(NOW, 10) == []
    assert fault_proxy.fired.is_set()
    assert [j.id for j in await store.claim_due(NOW, 10)] == [j.id for j in jobs]


async def test_a_batch_whose_reply_was_lost_reports_each_job_it_changed(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = [await store.insert(make_job(priority=p)) for p in (3, 2, 1)]
    await store.claim_due(NOW, 10)
    await store.apply(states.pick(jobs[2].id, worker="other", token="taken", now=NOW))
    fault_proxy.lose_next(UPDATE, "reply")
    picks = [states.pick(j.id, worker="w", token=f"t{i}", now=NOW) for i, j in enumerate(jobs)]
    results = await store.apply_many(picks)
    assert fault_proxy.fired.is_set()
    assert [r.claim_token if r else None for r in results] == ["t0", "t1", None]
    assert (await store.get(jobs[2].id)).claim_token == "taken"


async def test_a_batch_whose_request_was_lost_is_sent_again_once(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = [await store.insert(make_job(priority=p)) for p in (3, 2, 1)]
    await store.claim_due(NOW, 10)
    fault_proxy.lose_next(UPDATE, "request")
    changes: list[states.Change] = []
    for i, job in enumerate(jobs):
        changes.append(states.pick(job.id, worker="w", token=f"t{i}", now=NOW))
        changes.append(states.start(job.id, token=f"t{i}", now=NOW))
    results = await store.apply_many(changes)
    assert fault_proxy.fired.is_set()
    running = results[1::2]
    assert [(r.status, r.attempts) if r else None for r in running] == [(Status.RUNNING, 1)] * 3
    assert [r.status if r else None for r in results[0::2]] == [Status.CLAIMED] * 3
    # Started once each, not twice.
    assert [(await store.get(j.id)).attempts for j in jobs] == [1, 1, 1]


# ---------------------------------------------------------------------------- batches


async def test_full_chunks_of_a_batch_go_through_the_server_within_its_limits(
    database: str,
) -> None:
    # FerretDB never answers a multi-statement update of 100 statements, or of about 16 KB
    # of them: batches are chunked below both, and a chunk of the maximum size (by count,
    # then by bytes) must come back well within a short socket timeout.
    store = MongoJobStore(mongo_uri(), database, socket_timeout=10.0)
    await store.start()
    try:
        jobs = await store.insert_many([make_job() for _ in range(MAX_STATEMENTS * 2 + 7)])
        assert await store.claim_due(NOW, len(jobs)) != []
        ids = [j.id for j in jobs if isinstance(j, Job)]
        changes: list[states.Change] = []
        for i, job_id in enumerate(ids):
            changes.append(states.pick(job_id, worker="worker-1", token=f"{i:032d}", now=NOW))
            changes.append(states.start(job_id, token=f"{i:032d}", now=NOW))
        # Each pick+start is one statement; the first chunk is full (one more would not fit).
        mark = new_mark()
        sizes = [
            statement_size(change_filter(c), marked(update_document(c), mark))
            for c in (chain(changes[i], changes[i + 1]) for i in range(0, len(changes), 2))
            if c is not None
        ]
        first = chunks(sizes)[0]
        assert len(first) == MAX_STATEMENTS or sum(sizes[: len(first) + 1]) > MAX_CHUNK_BYTES
        with trio.fail_after(30):
            started = await store.apply_many(changes)
        running = [job for job in started[1::2] if job is not None]
        assert [(j.status, j.claim_token) for j in running] == [
            (Status.RUNNING, f"{i:032d}") for i in range(len(ids))
        ]
        # Results of 1 KB: these chunks are full by bytes; one of 40 KB goes alone.
        results = [{"blob": "x" * (40_000 if i == 3 else 1_000)} for i in range(len(running))]
        outcomes = [
            states.complete(job, token=job.claim_token or "", now=NOW, result=result)
            for job, result in zip(running, results, strict=True)
        ]
        with trio.fail_after(30):
            completed = await store.apply_many(outcomes)
        assert [j.status if j else None for j in completed] == [Status.COMPLETED] * len(ids)
        assert (await store.get(ids[3])).result == results[3]
        assert len(await store.attempts(ids[-1])) == 1
    finally:
        await store.close()


async def test_a_batch_reports_exactly_the_changes_whose_condition_held(
    store: MongoJobStore,
) -> None:
    jobs = [await store.insert(make_job()) for _ in range(5)]
    await store.claim_due(NOW, 5)
    # Two of them are taken by another executor first.
    for job in jobs[1:3]:
        assert await store.apply(states.pick(job.id, worker="x", token="x", now=NOW))
    picks = [states.pick(j.id, worker="w", token=f"t{i}", now=NOW) for i, j in enumerate(jobs)]
    results = await store.apply_many(picks)
    assert [r.claim_token if r else None for r in results] == ["t0", None, None, "t3", "t4"]


async def test_bulk_retry_counts_every_job_even_when_the_scheduler_claims_them_at_once(
    store: MongoJobStore,
) -> None:
    # Regression: the batch's count came from reading back its mark, which a claim of the
    # retried (due) jobs could overwrite first; 1,000 retries on the distributed roles then
    # reported fewer than 1,000 changed. The count is the servers' matched count now, and a
    # claim marks a field of its own.
    inserted = await store.insert_many([make_job() for _ in range(120)])
    jobs = [job for job in inserted if isinstance(job, Job)]
    cancelled = await store.apply_many([states.cancel(job, now=NOW) for job in jobs])
    retries = [states.retry(job, now=NOW) for job in cancelled if job is not None]
    assert len(retries) == 120
    claimed: list[Job] = []
    done = trio.Event()

    async def claimer() -> None:
        while not done.is_set():
            claimed.extend(await store.claim_due(NOW, 7))
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(claimer)
        assert await store.apply_bulk(retries) == 120
        done.set()
    claimed.extend(await store.claim_due(NOW, 200))
    assert sorted(j.id for j in claimed) == sorted(j.id for j in jobs)


async def test_counts_follow_mongodb_semantics(database: str) -> None:
    """The Overview's ``count`` commands, checked against answers computed here: on the test
    stack FerretDB counts a whole-filter match in SQLite from an index (the patch's change 6),
    where a string condition is the value alone unless another type could read the same."""
    rng = random.Random(11)
    hex_id = ObjectId()
    docs: list[Document] = []
    for _ in range(400):
        doc: Document = {
            "_id": ObjectId(),
            "tenantId": rng.choice(["a", "b"]),
            "status": rng.choice(["pending", "completed", "dlq"]),
            "updatedAt": NOW + timedelta(seconds=rng.randint(-100, 100)),
        }
        # A field holding an ObjectId, its hex as a string, a document or a number.
        doc["ref"] = rng.choice([hex_id, str(hex_id), {"x": 1}, 7, "plain"])
        docs.append(doc)
    cases: list[tuple[Document, Callable[[Document], bool]]] = [
        ({"status": "completed"}, lambda d: d["status"] == "completed"),
        (
            {"tenantId": "a", "status": "dlq"},
            lambda d: d["tenantId"] == "a" and d["status"] == "dlq",
        ),
        ({"status": "none"}, lambda d: False),
        ({"ref": str(hex_id)}, lambda d: d["ref"] == str(hex_id)),
        ({"ref": "plain"}, lambda d: d["ref"] == "plain"),
        (
            {"status": "completed", "updatedAt": {"$gte": NOW}},
            lambda d: d["status"] == "completed" and d["updatedAt"] >= NOW,
        ),
        ({}, lambda d: True),
    ]

    def run(collection: Any) -> list[int]:
        collection.insert_many(docs)
        for index in INDEXES:
            collection.create_indexes([index])
        database_ = collection.database
        return [
            int(database_.command("count", collection.name, query=query)["n"]) for query, _ in cases
        ]

    got = await _raw(mongo_uri(), database, run)
    expected = [sum(1 for d in docs if matches(d)) for _, matches in cases]
    assert got == expected
    assert expected[3] > 0
    assert expected[4] > 0
