"""The user actions: a person's cancel, retry, pause, resume, retire or edit of a
job, each one conditional update like the roles' transitions in :mod:`._lifecycle`.

See the package docstring for the diagram.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import MAX_REPLAYS, Job, Replay, Status, utc

from ._lifecycle import Change, as_read, attempt_record, mark_settling
from ._statuses import CANCELLABLE


def cancel(job: Job, *, now: datetime) -> Change:
    """pending/queued/claimed (or a paused template) -> cancelled.

    A queued job's wake-up then loses its pick; a claimed job's start loses (the executor
    drops it). Conditioned on the status only: from any of these the outcome is the same.
    """
    now = utc(now)
    return Change(
        transition="cancel",
        job_id=job.id,
        expect={"status": CANCELLABLE},
        set=mark_settling(
            job, {"status": Status.CANCELLED, "claim_token": None, "updated_at": now}
        ),
    )


def request_cancel(job: Job, *, now: datetime) -> Change:
    """running -> running with ``cancel_requested_at``: the executor's next heartbeat reads
    it (the heartbeat's update returns the job) and stops the handler."""
    now = utc(now)
    return Change(
        transition="request_cancel",
        job_id=job.id,
        expect={"status": Status.RUNNING, "claim_token": job.claim_token},
        set={"cancel_requested_at": now, "updated_at": now},
    )


def finish_cancel(job: Job, *, token: str, now: datetime) -> Change:
    """running -> cancelled, by the executor that stopped the handler (token-fenced)."""
    now = utc(now)
    return Change(
        transition="finish_cancel",
        job_id=job.id,
        expect={"status": Status.RUNNING, "claim_token": token},
        set=mark_settling(
            job,
            {
                "status": Status.CANCELLED,
                "claim_token": None,
                "last_error": "cancelled while running",
                "updated_at": now,
            },
        ),
        # The attempt started (``start`` counted it) and ends here, cancelled.
        record=attempt_record(job, outcome=Outcome.CANCELLED, now=now),
    )


def retry(
    job: Job,
    *,
    now: datetime,
    scheduled_at: datetime | None = None,
    payload: Mapping[str, Any] | None = None,
) -> Change:
    """dlq/cancelled -> pending (a replay): due ``scheduled_at`` (default now), attempts
    reset, optionally a new payload; a :class:`Replay` record of what it left behind is kept
    (the last MAX_REPLAYS). Conditioned on the exact version read (``updated_at``), so two
    racing retries replay once."""
    now = utc(now)
    return Change(
        transition="retry",
        job_id=job.id,
        expect=as_read(job),
        set={
            "status": Status.PENDING,
            "scheduled_at": utc(scheduled_at or now),
            **replayed(job, now=now, payload=payload),
        },
    )


def replayed(job: Job, *, now: datetime, payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """What every retry of ``job`` sets besides its status and due time: attempts reset,
    its error, claim and requests cleared, a :class:`Replay` of what it left behind kept
    (the last MAX_REPLAYS), and ``payload`` when given. (``now``: in UTC already.)"""
    replay = Replay(
        at=now,
        previous_status=job.status,
        previous_error=job.last_error,
        previous_attempts=job.attempts,
        run=job.run + 1,
    )
    changes: dict[str, Any] = {
        "attempts": 0,
        "last_error": None,
        "claim_token": None,
        "queued_at": None,
        "cancel_requested_at": None,
        "replays": (*job.replays, replay)[-MAX_REPLAYS:],
        "updated_at": now,
    }
    if payload is not None:
        changes["payload"] = dict(payload)
    return changes


def pause(template: Job, *, now: datetime) -> Change:
    """A cron template: pending -> paused (it stops firing)."""
    now = utc(now)
    return Change(
        transition="pause",
        job_id=template.id,
        expect={"status": Status.PENDING, "cron": template.cron},
        set={"status": Status.PAUSED, "updated_at": now},
    )


def resume(template: Job, *, next_at: datetime, now: datetime) -> Change:
    """A cron template: paused -> pending at ``next_at``, its next fire time after now, so
    the fire times missed while paused do not run (no burst)."""
    now = utc(now)
    return Change(
        transition="resume",
        job_id=template.id,
        expect={"status": Status.PAUSED, "cron": template.cron},
        set={"status": Status.PENDING, "scheduled_at": utc(next_at), "updated_at": now},
    )


def retire(template: Job, *, now: datetime) -> Change:
    """A cron template: pending/paused/dlq -> cancelled (it never fires again; its runs stay)."""
    now = utc(now)
    return Change(
        transition="retire",
        job_id=template.id,
        expect={"status": (Status.PENDING, Status.PAUSED, Status.DLQ), "cron": template.cron},
        set={"status": Status.CANCELLED, "updated_at": now},
    )


def update_template(template: Job, *, fields: Mapping[str, Any], now: datetime) -> Change:
    """A cron template's ``fields`` (cron, cron_policy, payload, priority, max_attempts,
    scheduled_at) change in place. Conditioned on the version read (status and
    ``updated_at``), so an update never overwrites a change it did not see."""
    now = utc(now)
    return Change(
        transition="update_template",
        job_id=template.id,
        expect=as_read(template),
        set={**fields, "updated_at": now},
    )
