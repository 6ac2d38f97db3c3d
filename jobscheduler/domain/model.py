"""The job model and its JSON shape.

A job is one record in the store. Its JSON shape (the HTTP contract) is produced in exactly
one function, :func:`job_to_json`. Timestamps are always timezone-aware UTC. What clients
send is validated in :mod:`jobscheduler.domain.validation`.
"""

from __future__ import annotations

import contextlib
import enum
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import attrs
from bson import ObjectId

from jobscheduler.errors import ValidationError

from . import cron
from .cron import CronPolicy
from .steps import Step

MAX_STRING_LENGTH = 256
MAX_ATTEMPTS_LIMIT = 100
MAX_PRIORITY = 1_000_000
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 5000
MAX_ERROR_LENGTH = 2000

_OBJECT_ID = re.compile(r"[0-9a-f]{24}")


class Status(enum.StrEnum):
    """Where a job is in its lifecycle. Only :mod:`jobscheduler.domain.states` moves a job between
    them."""

    #: Stored, waiting for ``scheduledAt``; cron templates stay here between fire times.
    PENDING = "pending"
    #: Claimed by the scheduler and announced on the bus; no executor has it yet.
    QUEUED = "queued"
    #: An executor took it (``claimedBy``/``claimedAt``/claim token set) and is about to run it.
    CLAIMED = "claimed"
    #: The handler is running; the executor refreshes ``heartbeatAt``.
    RUNNING = "running"
    #: The handler returned successfully. Final.
    COMPLETED = "completed"
    #: Defined by the seed's model but never written: failures go to pending or dlq.
    FAILED = "failed"
    #: Attempts exhausted (or a cron template that no longer parses). Final; never claimed.
    DLQ = "dlq"
    #: Cancelled by a user (a retired cron template, too). Final until retried.
    CANCELLED = "cancelled"
    #: A cron template that does not fire until resumed.
    PAUSED = "paused"
    #: A workflow step whose parents have not all completed: never claimed; released to
    #: pending by its own transition once they have (``states.release_step``).
    WAITING = "waiting"


LISTABLE_STATUSES = tuple(s.value for s in Status)


def _aware(instance: object, attribute: attrs.Attribute[Any], value: datetime | None) -> None:
    # Identity first: stores and ``utc`` hand out ``datetime.UTC`` itself, and this runs six
    # times for every job decoded on the hot path.
    if value is None or value.tzinfo is UTC:
        return
    if value.tzinfo is None or value.utcoffset() != timedelta(0):
        raise ValueError(f"{attribute.name} must be timezone-aware UTC, got {value!r}")


@attrs.frozen(kw_only=True)
class Job:
    """One job document. Immutable: every change produces a new value from the store."""

    id: str
    idempotency_key: str
    tenant_id: str
    job_type: str
    payload: dict[str, Any] = attrs.field(factory=dict)
    priority: int = 0
    status: Status = Status.PENDING
    scheduled_at: datetime = attrs.field(validator=_aware)
    cron: str | None = None
    #: A template's zone, DST, catch-up and jitter settings; None reads as the defaults.
    cron_policy: CronPolicy | None = None
    attempts: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    last_error: str | None = None
    claimed_by: str | None = None
    claimed_at: datetime | None = attrs.field(default=None, validator=_aware)
    claim_token: str | None = None
    heartbeat_at: datetime | None = attrs.field(default=None, validator=_aware)
    queued_at: datetime | None = attrs.field(default=None, validator=_aware)
    created_at: datetime = attrs.field(validator=_aware)
    updated_at: datetime = attrs.field(validator=_aware)
    #: A template's fire time held by ``overlap="buffer_one"`` until its previous run ends.
    cron_buffered: datetime | None = attrs.field(default=None, validator=_aware)
    #: The handler's return value (JSON; at most 64 KiB encoded), set when it completes.
    result: Any = None
    #: For a cron run: the id of the template that spawned it.
    template_id: str | None = None
    #: For a cron run: the fire time it stands for. (template_id, fire_at) identifies a run
    #: (its own unique index in every store), whatever its idempotency key.
    fire_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: A running job's cancel request; the executor's next heartbeat stops the handler.
    cancel_requested_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: The job's retries by a user, oldest first (at most MAX_REPLAYS kept).
    replays: tuple[Replay, ...] = ()
    #: For a template declared in code: the app whose ``schedules sync`` made it (and may
    #: change or retire it). None: made by hand.
    managed_by: str | None = None
    #: For a workflow step: the workflow it belongs to, and its place there.
    workflow_id: str | None = None
    step: Step | None = None
    #: For a step a handler spawned (``ctx.spawn``): the id of the step that spawned it.
    spawned_by: str | None = None
    #: A workflow step whose status the workflow has not acted on yet: set by each
    #: transition that ends it (and by its insert as a root, and by a retry), cleared once
    #: the steps waiting for it are released or cancelled. The reaper sweeps for it, so a
    #: step whose parents are done is released even when whoever ended them crashed.
    step_dirty: bool = False
    #: Within its tenant and priority level, the group the job takes its turn with in a fair
    #: claim ("": the tenant's default group).
    fairness_key: str = ""
    #: Jobs of one type with the same key count together against the type's
    #: ``concurrency`` (and ``key_rate_limit``) in their tenant.
    concurrency_key: str | None = None
    #: The concurrency slot of its key the job holds from its claim until the transition
    #: that ends or recovers its run (unique in the store: two jobs never hold one slot).
    key_slot: str | None = None
    #: The same for its type's ``max_running`` slots.
    type_slot: str | None = None
    #: When the job reached its final status (completed, dlq, cancelled): what its retention
    #: counts from. Written by the transition that ends it (:class:`states.Change
    #: <jobscheduler.domain.states.Change>`), cleared by a retry.
    finished_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: The W3C ``traceparent`` of the trace the job belongs to (the create's span, or the
    #: caller's header as received; a cron run's fire span): its claim and attempt spans
    #: join that trace. Not part of the job's JSON (see ``observability/tracecontext.py``).
    trace_parent: str | None = None

    @property
    def run(self) -> int:
        """Which run of the job this is: 0 until a user retries it, then 1, 2, ...
        (the newest replay says; one written before replays were numbered counts by its
        place in the list)."""
        if not self.replays:
            return 0
        last = self.replays[-1].run
        return last if last is not None else len(self.replays)


#: The :class:`Job` fields that hold a time.
JOB_TIME_FIELDS: Final = frozenset(
    {
        "scheduled_at",
        "claimed_at",
        "heartbeat_at",
        "queued_at",
        "created_at",
        "updated_at",
        "fire_at",
        "cancel_requested_at",
        "cron_buffered",
        "finished_at",
    }
)


@attrs.frozen(kw_only=True)
class Replay:
    """One retry of a dlq or cancelled job by a user: when, and what it left behind."""

    at: datetime = attrs.field(validator=_aware)
    previous_status: Status
    previous_error: str | None = None
    previous_attempts: int = 0
    #: The run this replay started (1 for the first retry); None in a replay stored before
    #: runs were numbered.
    run: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at": format_time(self.at),
            "previousStatus": self.previous_status.value,
            "previousAttempts": self.previous_attempts,
        }
        if self.run is not None:
            out["run"] = self.run
        if self.previous_error is not None:
            out["previousError"] = self.previous_error
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Replay:
        """The inverse of :meth:`to_json` (how both stores keep replays)."""
        return cls(
            at=parse_time(data["at"], "replays.at"),
            previous_status=Status(data["previousStatus"]),
            previous_error=data.get("previousError"),
            previous_attempts=int(data.get("previousAttempts", 0)),
            run=None if data.get("run") is None else int(data["run"]),
        )


#: How many replays a job remembers (the oldest are dropped first).
MAX_REPLAYS = 20


def new_job_id() -> str:
    """A fresh 24-hex ObjectId, the id format of the contract (and Mongo's ``_id``)."""
    return str(ObjectId())


def is_job_id(text: str) -> bool:
    return bool(_OBJECT_ID.fullmatch(text))


def utc(dt: datetime) -> datetime:
    """Normalise an aware datetime to UTC, truncated to milliseconds.

    Milliseconds are what MongoDB keeps; truncating everywhere makes every store return
    exactly the timestamps it was given, so equality conditions on them are portable.
    """
    if dt.tzinfo is UTC and not dt.microsecond % 1000:
        return dt  # already normalised (the common case on the hot path)
    if dt.tzinfo is None:
        raise ValueError("naive datetime")
    dt = dt.astimezone(UTC)
    return dt.replace(microsecond=dt.microsecond - dt.microsecond % 1000)


def format_time(dt: datetime) -> str:
    """RFC3339 UTC with ``Z``; fractional seconds only when present."""
    dt = dt.astimezone(UTC)
    # strftime's %Y does not zero-pad years before 1000; RFC3339 needs four digits.
    text = (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    )
    if dt.microsecond:
        text += f".{dt.microsecond // 1000:03d}"
    return text + "Z"


def optional_time(dt: datetime | None) -> str | None:
    """:func:`format_time`, or None for no time."""
    return None if dt is None else format_time(dt)


def present(**fields: Any) -> dict[str, Any]:
    """The fields whose value is not None, in their order: how the JSON shapes leave an
    absent optional field out."""
    return {name: value for name, value in fields.items() if value is not None}


_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?"
    r"(Z|z|[+-][0-9]{2}:[0-9]{2})"
)


#: A date and time that would be RFC3339 if it named its zone (``2026-12-02T09:00:00``).
_NO_ZONE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?")


def parse_time(text: str, field: str) -> datetime:
    """Parse an RFC3339 timestamp; a missing timezone is a ValidationError that says so
    (``scheduledAt 2026-12-02T09:00:00 has no time zone; add Z or +01:00``)."""
    match = _RFC3339.fullmatch(text)
    if not match:
        if _NO_ZONE.fullmatch(text):
            raise ValidationError(f"{field} {text} has no time zone; add Z or +01:00")
        raise ValidationError(
            f"{field}: must be an RFC3339 timestamp with a timezone, e.g. 2026-09-29T18:00:00Z"
        )
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7), match.group(8)
    micros = int((fraction[1:] + "000000")[:6]) if fraction else 0
    if zone in ("Z", "z"):
        offset = timedelta(0)
    else:
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise ValidationError(f"{field}: invalid timezone offset {zone!r}")
        offset = sign * timedelta(hours=hours, minutes=minutes)
    if second == 60:  # leap second: RFC3339 allows it, datetime does not
        second = 59
    try:
        return utc(datetime(year, month, day, hour, minute, second, micros, tzinfo=UTC) - offset)
    except (ValueError, OverflowError) as exc:
        raise ValidationError(f"{field}: out of range: {exc}") from None


def job_to_json(job: Job, *, held: str | None = None) -> dict[str, Any]:
    """The contract's JSON shape of a job (absent optional fields are omitted); ``held``:
    why the scheduler holds the due job back (``GET /jobs/{id}`` and its page say)."""
    out: dict[str, Any] = {
        "id": job.id,
        "idempotencyKey": job.idempotency_key,
        "tenantId": job.tenant_id,
        "jobType": job.job_type,
        "payload": job.payload,
        "priority": job.priority,
        "status": job.status.value,
        "scheduledAt": format_time(job.scheduled_at),
    }
    if job.cron is not None:
        out["cron"] = job.cron
        out.update(cron_template_json(job))
        out.update(
            present(bufferedFireAt=optional_time(job.cron_buffered), managedBy=job.managed_by)
        )
    out.update(
        present(
            templateId=job.template_id,
            workflowId=job.workflow_id,
            step=None if job.step is None else job.step.name,
            spawnedBy=job.spawned_by,
            fairnessKey=job.fairness_key or None,
            concurrencyKey=job.concurrency_key,
            claimedBy=job.claimed_by,
            claimedAt=optional_time(job.claimed_at),
        )
    )
    out["attempts"] = job.attempts
    out["maxAttempts"] = job.max_attempts
    out.update(
        present(
            lastError=job.last_error,
            result=job.result,
            cancelRequestedAt=optional_time(job.cancel_requested_at),
            replays=[replay.to_json() for replay in job.replays] or None,
            held=held,
        )
    )
    out["createdAt"] = format_time(job.created_at)
    out["updatedAt"] = format_time(job.updated_at)
    out.update(present(finishedAt=optional_time(job.finished_at)))
    return out


def cron_policy_of(job: Job) -> CronPolicy:
    """The template's schedule settings (the defaults for one stored without them)."""
    return job.cron_policy or cron.DEFAULT_POLICY


def cron_template_json(job: Job) -> dict[str, Any]:
    """A template's schedule fields and ``nextFireLocal`` (its scheduledAt in its zone)."""
    policy = cron_policy_of(job)
    out = policy.to_json()
    # A hand-edited, unknown zone shows no local time; the scheduler dead-letters it.
    with contextlib.suppress(ValidationError):
        out["nextFireLocal"] = policy.local(job.scheduled_at).isoformat()
    return out


# --------------------------------------------------------------------------- requests


def truncate_error(text: str) -> str:
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"
