"""The JSON shape of a job (``job_to_json``: contract fields, optional ones only when
present, internal ones never) and RFC3339 times (``format_time``/``parse_time``), including
the Job model's refusal of naive or non-UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from jobscheduler.domain.model import Job, Status, format_time, job_to_json, parse_time

from .conftest import make_job
from .model_support import NOW

# ----------------------------------------------------------------------- JSON shape


def test_job_to_json_has_the_contract_shape_and_omits_absent_optional_fields() -> None:
    job = make_job(
        key="test-job-1",
        job_type="log-message",
        payload={"message": "hello"},
        priority=5,
        scheduled_at=NOW,
        created_at=NOW,
    )
    out = job_to_json(job)
    assert out == {
        "id": job.id,
        "idempotencyKey": "test-job-1",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "hello"},
        "priority": 5,
        "status": "pending",
        "scheduledAt": "2026-09-29T18:00:00Z",
        "attempts": 0,
        "maxAttempts": 3,
        "createdAt": "2026-09-29T18:00:00Z",
        "updatedAt": "2026-09-29T18:00:00Z",
    }


def test_job_to_json_includes_optional_fields_when_present_and_never_internal_ones() -> None:
    claimed = NOW + timedelta(seconds=1, milliseconds=250)
    job = Job(
        id="66f9a1c2e4b0a3d5c8f12a01",
        idempotency_key="k",
        tenant_id="t",
        job_type="noop",
        status=Status.PENDING,
        scheduled_at=NOW,
        cron="0 2 * * *",
        attempts=1,
        last_error="boom",
        claimed_by="worker-3k9x",
        claimed_at=claimed,
        claim_token="secret-token",
        heartbeat_at=claimed,
        queued_at=NOW,
        created_at=NOW,
        updated_at=claimed,
    )
    out = job_to_json(job)
    assert out["cron"] == "0 2 * * *"
    assert out["claimedBy"] == "worker-3k9x"
    assert out["claimedAt"] == "2026-09-29T18:00:01.250Z"
    assert out["lastError"] == "boom"
    assert out["updatedAt"] == "2026-09-29T18:00:01.250Z"
    for internal in ("claimToken", "claim_token", "heartbeatAt", "queuedAt"):
        assert internal not in out
    assert "secret-token" not in repr(out)


# ----------------------------------------------------------------------- times


@pytest.mark.parametrize(
    ("dt", "text"),
    [
        (datetime(2026, 9, 29, 18, 0, tzinfo=UTC), "2026-09-29T18:00:00Z"),
        (datetime(2026, 9, 29, 18, 0, 0, 5000, tzinfo=UTC), "2026-09-29T18:00:00.005Z"),
        (datetime(2026, 9, 29, 18, 0, 0, 120000, tzinfo=UTC), "2026-09-29T18:00:00.120Z"),
        (
            datetime(2026, 9, 29, 20, 0, tzinfo=timezone(timedelta(hours=2))),
            "2026-09-29T18:00:00Z",
        ),
    ],
)
def test_format_time_is_utc_with_z_and_milliseconds_only_when_present(
    dt: datetime, text: str
) -> None:
    assert format_time(dt) == text
    assert format_time(dt).endswith("Z")


def test_format_time_round_trips_through_parse_time() -> None:
    dt = datetime(2026, 9, 29, 18, 0, 0, 123000, tzinfo=UTC)
    assert parse_time(format_time(dt), "x") == dt


def test_bug_format_time_does_not_zero_pad_years_before_1000() -> None:
    # Bug: format_time uses strftime('%Y'), which does not zero-pad on glibc, so Go's zero
    # time "0001-01-01T00:00:00Z" (accepted by parse_time) comes back as "1-01-01T00:00:00Z",
    # which is not RFC3339.
    zero = parse_time("0001-01-01T00:00:00Z", "scheduledAt")
    assert format_time(zero) == "0001-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "field", ["scheduled_at", "created_at", "updated_at", "claimed_at", "heartbeat_at", "queued_at"]
)
def test_job_rejects_naive_datetimes(field: str) -> None:
    values: dict[str, Any] = {
        "id": "66f9a1c2e4b0a3d5c8f12a01",
        "idempotency_key": "k",
        "tenant_id": "t",
        "job_type": "noop",
        "scheduled_at": NOW,
        "created_at": NOW,
        "updated_at": NOW,
    }
    values[field] = datetime(2026, 9, 29, 18, 0)
    with pytest.raises(ValueError, match=f"{field} must be timezone-aware UTC"):
        Job(**values)


def test_job_rejects_aware_datetimes_that_are_not_utc() -> None:
    with pytest.raises(ValueError, match="scheduled_at must be timezone-aware UTC"):
        Job(
            id="66f9a1c2e4b0a3d5c8f12a01",
            idempotency_key="k",
            tenant_id="t",
            job_type="noop",
            scheduled_at=datetime(2026, 9, 29, 20, 0, tzinfo=timezone(timedelta(hours=2))),
            created_at=NOW,
            updated_at=NOW,
        )
