"""The Mongo store's batch bookkeeping and command counter, without a server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry
from pymongo.monitoring import CommandStartedEvent

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.store.mongo.batch import (
    BATCH_FIELD,
    MAX_CHUNK_BYTES,
    MAX_STATEMENTS,
    chunks,
    distinct_jobs,
    marked,
    new_mark,
    plan,
    statement_size,
    unit_results,
)
from jobscheduler.store.mongo.codec import change_filter, update_document
from jobscheduler.store.mongo.commands import CommandCounter

NOW = datetime(2026, 1, 1, tzinfo=UTC)
JOB_ID = "65a000000000000000000001"
OTHER_ID = "65a000000000000000000002"


def test_chunks_cover_every_statement_in_order_within_both_bounds() -> None:
    sizes = [100] * 120 + [3000, 3000, 3000] + [9000] + [10] * 7
    ranges = chunks(sizes, max_statements=50, max_bytes=8192)
    assert [i for r in ranges for i in r] == list(range(len(sizes)))
    for r in ranges:
        total = sum(sizes[i] for i in r)
        assert len(r) <= 50
        assert total <= 8192 or len(r) == 1
    assert [len(r) for r in ranges[:3]] == [50, 50, 22]  # 20 x 100 B + 2 x 3 KB


def test_a_statement_larger_than_the_byte_budget_goes_alone() -> None:
    assert chunks([10, 20_000, 10], max_bytes=100) == [range(0, 1), range(1, 2), range(2, 3)]


def test_no_statements_make_no_chunks_and_bounds_must_be_positive() -> None:
    assert chunks([]) == []
    with pytest.raises(ValueError, match="positive"):
        chunks([1], max_statements=0)


def test_the_default_bounds_stay_under_what_ferretdb_answers() -> None:
    # Measured on the test stack: 99 statements answered, 100 hung; 12 x 1 KB answered,
    # 15 x 1 KB (16 KB) hung. The defaults leave a margin below both.
    assert MAX_STATEMENTS <= 50
    assert MAX_CHUNK_BYTES <= 8 * 1024
    pick = states.pick(JOB_ID, worker="worker-1", token="f" * 24, now=NOW)
    size = statement_size(change_filter(pick), marked(update_document(pick), new_mark()))
    full = chunks([size] * 500)
    assert max(len(r) for r in full) == min(MAX_STATEMENTS, MAX_CHUNK_BYTES // size)


def test_marked_adds_the_batch_field_to_the_set_and_keeps_the_rest() -> None:
    update = {"$set": {"status": "claimed"}, "$inc": {"attempts": 1}}
    assert marked(update, "m1") == {
        "$set": {"status": "claimed", BATCH_FIELD: "m1"},
        "$inc": {"attempts": 1},
    }
    assert update == {"$set": {"status": "claimed"}, "$inc": {"attempts": 1}}
    assert new_mark() != new_mark()


def test_plan_chains_a_pick_with_its_start_and_keeps_other_changes_alone() -> None:
    pick = states.pick(JOB_ID, worker="w", token="t", now=NOW)
    start = states.start(JOB_ID, token="t", now=NOW)
    beat = states.heartbeat(OTHER_ID, token="u", now=NOW)
    units = plan([pick, start, beat])
    assert [(u.first, u.second) for u in units] == [(pick, start), (beat, None)]
    assert units[0].change.transition == "pick+start"
    assert distinct_jobs(units)
    assert not distinct_jobs(plan([beat, beat]))


def _running(**fields: object) -> Job:
    values: dict[str, object] = {
        "id": JOB_ID,
        "idempotency_key": "k",
        "tenant_id": "t",
        "job_type": "noop",
        "payload": {},
        "scheduled_at": NOW,
        "created_at": NOW,
        "updated_at": NOW,
        "status": Status.RUNNING,
        "attempts": 1,
        "claim_token": "t",
    }
    values.update(fields)
    return Job(**values)  # type: ignore[arg-type]


def test_unit_results_rebuild_the_state_between_a_chained_pick_and_start() -> None:
    [unit] = plan(
        [
            states.pick(JOB_ID, worker="w", token="t", now=NOW),
            states.start(JOB_ID, token="t", now=NOW),
        ]
    )
    picked, running = unit_results(unit, _running())
    assert picked is not None
    assert running is not None
    assert (picked.status, picked.attempts) == (Status.CLAIMED, 0)
    assert (running.status, running.attempts) == (Status.RUNNING, 1)
    # Not applied: only the first change is answered; the caller tries the second alone.
    assert unit_results(unit, None) == [None]


def test_unit_results_of_a_single_change_are_its_job() -> None:
    [unit] = plan([states.heartbeat(JOB_ID, token="t", now=NOW)])
    job = _running()
    assert unit_results(unit, job) == [job]
    assert unit_results(unit, None) == [None]


def _started(name: str, request_id: int) -> CommandStartedEvent:
    return CommandStartedEvent(
        {name: "jobs", "$db": "db"}, "db", request_id, ("127.0.0.1", 27017), None
    )


def test_the_command_counter_counts_store_commands_by_name_not_driver_handshakes() -> None:
    registry = CollectorRegistry()
    counter = CommandCounter(registry)
    for i, name in enumerate(["update", "find", "update", "hello", "findAndModify"]):
        counter.started(_started(name, i))

    def value(command: str) -> float | None:
        return registry.get_sample_value("store_commands_total", {"command": command})

    assert value("update") == 2
    assert value("find") == 1
    assert value("findAndModify") == 1
    assert value("hello") is None
