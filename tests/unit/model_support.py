"""What the job-model tests (``test_model_*``) share: a fixed ``NOW``, the default job
types, and ``body``/``create``/``rejected`` to build a create request and parse it (or see
it refused)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobscheduler.domain.model import Job
from jobscheduler.domain.validation import parse_create_request
from jobscheduler.errors import ValidationError
from jobscheduler.handlers import default_registry

NOW = datetime(2026, 9, 29, 18, 0, 0, tzinfo=UTC)
JOB_TYPES = default_registry().validators()


def body(**overrides: Any) -> dict[str, Any]:
    """A valid one-off create body; ``None`` values remove a field."""
    values: dict[str, Any] = {
        "idempotencyKey": "key-1",
        "tenantId": "tenant-a",
        "jobType": "noop",
        "scheduledAt": "2026-09-29T18:00:00Z",
    }
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def create(raw: Any) -> Job:
    return parse_create_request(raw, now=NOW, job_types=JOB_TYPES)


def rejected(raw: Any, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        create(raw)
