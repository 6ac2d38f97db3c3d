"""The server semantics MongoJobStore's queries rely on, checked against a real server
(``MONGO_URI``, as in test_mongo_store.py): filters, sorts, limits and counts, against
answers computed here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from bson import ObjectId

from jobscheduler.store.mongo.codec import job_filter
from jobscheduler.store.mongo.store import INDEXES, Document
from jobscheduler.store.query import DUE_ONE_OFF, DUE_TEMPLATE
from tests.contract.store_fixtures import mongo_uri
from tests.contract.store_support import NOW
from tests.support.mongo import raw

pytestmark = pytest.mark.integration


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
            job_filter(DUE_ONE_OFF.due(due)),
            lambda d: (
                d["status"] == "pending" and d.get("cron") is None and d["scheduledAt"] <= due
            ),
            [("priority", -1), ("scheduledAt", 1), ("_id", 1)],
            20,
        ),
        (
            job_filter(DUE_TEMPLATE.due(due)),
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

    results = await raw(mongo_uri(), database, run)
    for (query, *_), (got, expected) in zip(cases, results, strict=True):
        assert got == expected, query


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

    got = await raw(mongo_uri(), database, run)
    expected = [sum(1 for d in docs if matches(d)) for _, matches in cases]
    assert got == expected
    assert expected[3] > 0
    assert expected[4] > 0
