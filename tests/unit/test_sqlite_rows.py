"""The SQLite store's row declarations (:mod:`jobscheduler.store.sqlite.rows`): the column list,
the INSERT, a record's parameters and the record of a row all follow the declared columns."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobscheduler.domain.attempts import Attempt, Outcome
from jobscheduler.store.sqlite.attempts import ATTEMPTS
from jobscheduler.store.sqlite.rows import Column, Rows, enum_column, millis_column

FINISHED = datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)


def test_a_record_goes_into_its_columns_in_order_and_comes_back_from_a_row() -> None:
    record = Attempt(job_id="j", run=1, number=2, outcome=Outcome.FAILED, finished_at=FINISHED)
    params = ATTEMPTS.params(record)
    assert params == ("j", 2, "failed", None, None, 1767225601000, None, None, None, 1)
    assert ATTEMPTS.load(params) == record


def test_the_statements_name_the_declared_columns() -> None:
    rows = Rows(Attempt, Column("job_id"), enum_column("outcome", Outcome), millis_column("at"))
    assert rows.select == "job_id, outcome, at"
    assert rows.insert("t", "INSERT OR IGNORE") == (
        "INSERT OR IGNORE INTO t (job_id, outcome, at) VALUES (?, ?, ?)"
    )


def test_a_column_holds_another_attribute_when_named_so() -> None:
    assert Column("tenant_id", "tenant").attr == "tenant"
    assert Column("tenant_id").attr == "tenant_id"


def test_a_row_of_another_width_is_refused() -> None:
    with pytest.raises(ValueError, match="zip"):
        ATTEMPTS.load(("j", 2, "failed"))
