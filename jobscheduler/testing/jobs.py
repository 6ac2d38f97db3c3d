"""Jobs as a store holds them, for tests of handlers, roles and stores.

``make_job()`` is a pending ``noop`` job of ``tenant-a``, created and due at
:data:`DEFAULT_TIME` with an empty payload; every field a test cares about is a keyword. A
suite with other defaults makes its own factory: ``make_job = JobFactory(at=NOW)``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from jobscheduler.domain.model import Job, Status, new_job_id, utc
from jobscheduler.domain.states import FINAL

#: When the jobs of :func:`make_job` are created and due: a fixed instant, so that a test
#: reads the same every time.
DEFAULT_TIME = datetime(2026, 1, 1, tzinfo=UTC)


@attrs.frozen
class JobFactory:
    """Makes jobs created and due at ``at`` (unless told otherwise) with a copy of
    ``payload``, each with a fresh id and, unless given, the key ``key-<id>``."""

    at: datetime = DEFAULT_TIME
    payload: Mapping[str, Any] = attrs.field(factory=dict)

    def __call__(
        self,
        *,
        key: str | None = None,
        tenant: str = "tenant-a",
        job_type: str = "noop",
        priority: int = 0,
        status: Status = Status.PENDING,
        scheduled_at: datetime | None = None,
        created_at: datetime | None = None,
        cron: str | None = None,
        attempts: int = 0,
        max_attempts: int = 3,
        payload: dict[str, Any] | None = None,
        template_id: str | None = None,
        fairness_key: str = "",
        concurrency_key: str | None = None,
    ) -> Job:
        """A job as the store would hold it (``updated_at`` is its ``created_at``, and so is
        ``finished_at`` in a final status)."""
        job_id = new_job_id()
        created = utc(created_at or self.at)
        return Job(
            id=job_id,
            idempotency_key=key or f"key-{job_id}",
            tenant_id=tenant,
            job_type=job_type,
            payload=payload if payload is not None else copy.deepcopy(dict(self.payload)),
            priority=priority,
            status=status,
            scheduled_at=utc(scheduled_at or self.at),
            cron=cron,
            attempts=attempts,
            max_attempts=max_attempts,
            created_at=created,
            updated_at=created,
            template_id=template_id,
            fairness_key=fairness_key,
            concurrency_key=concurrency_key,
            finished_at=created if status in FINAL else None,
        )


#: Jobs created and due at :data:`DEFAULT_TIME` with an empty payload.
make_job = JobFactory()
