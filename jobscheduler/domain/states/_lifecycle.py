"""The roles' transitions: what the scheduler, the executors and the reaper write as a job
runs (claim, pick, start, heartbeat, complete, fail, release, requeue, recover), plus
:class:`Change`, the one conditional update every transition returns. A cron template's moves
as it fires are in :mod:`._templates`.

See the package docstring for the state diagram and what ``attempts`` counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from jobscheduler.domain.attempts import Attempt, Failure, Outcome
from jobscheduler.domain.backoff import backoff_seconds
from jobscheduler.domain.model import Job, Status, truncate_error, utc
from jobscheduler.domain.notifications import Event, dlq_events

from ._statuses import FINAL, HOLDING_SLOTS, IN_FLIGHT

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: The job fields naming the flow-control slots a job holds (see :data:`HOLDING_SLOTS`).
SLOT_FIELDS: tuple[str, ...] = ("key_slot", "type_slot")


def _frees_slots(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """``values``, freeing the job's slots when it moves out of the statuses that hold them:
    the slot is freed by the very update that ends, hands back or recovers the run, so no
    transition (present or future) can leave one taken."""
    status = values.get("status")
    if status is None or status in HOLDING_SLOTS:
        return values
    return {**values, **dict.fromkeys(SLOT_FIELDS)}


@attrs.frozen(kw_only=True)
class Change:
    """One conditional update of one job.

    ``expect`` maps a Job field name to the value it must currently hold (a tuple of Status
    values means "any of these"). ``set`` maps Job field names to their new values; ``inc``
    maps integer Job fields to an amount added to their current value. ``record`` is the
    attempt record the store appends beside the job if, and only if, the change applies;
    ``events`` the notification events it writes the same way (a job reaching dlq).
    """

    transition: str
    job_id: str
    expect: Mapping[str, Any]
    set: Mapping[str, Any] = attrs.field(converter=_frees_slots)
    inc: Mapping[str, int] = attrs.field(factory=dict)
    record: Attempt | None = None
    events: tuple[Event, ...] = ()

    def __attrs_post_init__(self) -> None:
        # The one rule of ``finished_at``, for every transition (those to come included): a
        # change that writes a final status stamps it with its ``updated_at``; one that takes
        # a job out of a final status (a retry) clears it.
        status = self.set.get("status")
        if status is None or "finished_at" in self.set:
            return
        if Status(status) in FINAL:
            object.__setattr__(self, "set", {**self.set, "finished_at": self.set.get("updated_at")})
            return
        expected = self.expect.get("status")
        was = expected if isinstance(expected, tuple) else (expected,)
        if any(s is not None and Status(s) in FINAL for s in was):
            object.__setattr__(self, "set", {**self.set, "finished_at": None})

    def landed_on(self, job: Job) -> bool:
        """``job`` holds every value this change writes: a retried write whose first try
        timed out but landed finds its own write here (its ``updated_at`` is the instant
        the change was made, so another write does not pass for it)."""
        return all(getattr(job, field) == value for field, value in self.set.items())


def as_read(job: Job, *, status: Status | None = None) -> dict[str, Any]:
    """The condition of a move decided on this read of ``job``: its status (``status``
    instead, when the move leaves only that one) and its version (``updated_at``), so a
    change made since the read wins and two actors that read the same job move it once."""
    return {"status": job.status if status is None else status, "updated_at": job.updated_at}


def mark_settling(job: Job, changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` (a transition's writes), marked ``step_dirty`` when ``job`` is a workflow
    step that they end: its workflow must act on its end (release or cancel the steps waiting
    for it, or finish)."""
    if job.workflow_id is not None and changes.get("status") in FINAL:
        changes["step_dirty"] = True
    return changes


def claim_fields(now: datetime, start_at: datetime | None = None) -> dict[str, Any]:
    """pending -> queued: what the scheduler's claim writes on each due one-off job.

    The claim itself is a batch query in each store (due = ``status == pending``, no cron,
    ``scheduledAt <= now``; highest priority first, then oldest ``scheduledAt``). A job
    claimed ahead of its start under a rate limit is queued *for* ``start_at``: its
    ``queued_at`` is that instant, its wake-up says so, and the reaper counts its time in
    the queue from then.
    """
    now = utc(now)
    queued_at = now if start_at is None else utc(start_at)
    return {"status": Status.QUEUED, "queued_at": queued_at, "updated_at": now}


def pick(
    job_id: str, *, worker: str, token: str, now: datetime, queued_for: datetime | None = None
) -> Change:
    """queued -> claimed: an executor takes the job announced by a bus message.

    ``queued_for`` is the start instant a wake-up of a job claimed ahead names: the pick
    then also expects that ``queued_at``, so the wake-up of an earlier claim of the job
    cannot start it before its current instant."""
    now = utc(now)
    expect: dict[str, Any] = {"status": Status.QUEUED}
    if queued_for is not None:
        expect["queued_at"] = utc(queued_for)
    return Change(
        transition="pick",
        job_id=job_id,
        expect=expect,
        set={
            "status": Status.CLAIMED,
            "claimed_by": worker,
            "claimed_at": now,
            "claim_token": token,
            "heartbeat_at": now,
            "updated_at": now,
        },
    )


def start(job_id: str, *, token: str, now: datetime) -> Change:
    """claimed -> running: the handler is about to be called; the attempt counts from here.

    Needs only the id and token (``attempts`` is incremented, not set), so an executor can
    send it together with its pick.
    """
    now = utc(now)
    return Change(
        transition="start",
        job_id=job_id,
        expect={"status": Status.CLAIMED, "claim_token": token},
        set={"status": Status.RUNNING, "heartbeat_at": now, "updated_at": now},
        inc={"attempts": 1},
    )


def heartbeat(job_id: str, *, token: str, now: datetime) -> Change:
    """running -> running: proof of life, so the reaper leaves a long job alone."""
    now = utc(now)
    return Change(
        transition="heartbeat",
        job_id=job_id,
        expect={"status": Status.RUNNING, "claim_token": token},
        set={"heartbeat_at": now, "updated_at": now},
    )


def attempt_record(
    job: Job, *, outcome: Outcome, now: datetime, failure: Failure | None = None
) -> Attempt:
    """The record of the attempt ``job`` (as its executor holds it) ends with ``outcome``.

    The attempt's number is ``job.attempts`` once started (``start`` counted it); a job that
    never got past ``claimed`` is on attempt ``attempts + 1``.
    """
    number = job.attempts if job.status is Status.RUNNING else job.attempts + 1
    return Attempt(
        job_id=job.id,
        run=job.run,
        number=max(number, 1),
        outcome=outcome,
        worker=job.claimed_by,
        started_at=job.claimed_at,
        finished_at=utc(now),
        error_type=failure.type if failure else None,
        error_message=failure.message if failure else None,
        traceback=failure.traceback if failure else None,
    )


def complete(job: Job, *, token: str, now: datetime, result: Any = None) -> Change:
    """running -> completed, storing the handler's (already validated) ``result``."""
    now = utc(now)
    changes: dict[str, Any] = {
        "status": Status.COMPLETED,
        "claim_token": None,
        "updated_at": now,
    }
    if result is not None:
        changes["result"] = result
    return Change(
        transition="complete",
        job_id=job.id,
        expect={"status": Status.RUNNING, "claim_token": token},
        set=mark_settling(job, changes),
        record=attempt_record(job, outcome=Outcome.COMPLETED, now=now),
    )


def _failure_set(job: Job, *, now: datetime, error: str, permanent: bool = False) -> dict[str, Any]:
    """A started attempt failed: retry with backoff, or dlq once attempts reach the max (or
    at once when ``permanent``). The attempt was counted when it started."""
    changes: dict[str, Any] = {
        "last_error": truncate_error(error),
        "claim_token": None,
        "updated_at": now,
    }
    if permanent or job.attempts >= job.max_attempts:
        changes["status"] = Status.DLQ
    else:
        changes["status"] = Status.PENDING
        delay = backoff_seconds(max(job.attempts, 1))
        changes["scheduled_at"] = utc(now + timedelta(seconds=delay))
    return mark_settling(job, changes)


def _events(job: Job, changes: Mapping[str, Any], now: datetime) -> tuple[Event, ...]:
    """The events of a transition writing ``changes`` on ``job``: those of reaching dlq."""
    if changes.get("status") is not Status.DLQ:
        return ()
    return dlq_events(attrs.evolve(job, **changes), now)


def fail(
    job: Job,
    *,
    token: str,
    now: datetime,
    error: str | Failure,
    outcome: Outcome = Outcome.FAILED,
    permanent: bool = False,
) -> Change:
    """running -> pending with backoff, or -> dlq once attempts reach maxAttempts.

    ``error`` is the failure (a plain string is a failure without a type); ``outcome`` is
    ``failed`` or ``timed_out`` in the attempt record. ``permanent`` (the handler raised
    PermanentError): -> dlq at once, whatever attempts remain.
    """
    now = utc(now)
    failure = error if isinstance(error, Failure) else Failure(type="Error", message=error)
    summary = error.summary() if isinstance(error, Failure) else error
    changes = _failure_set(job, now=now, error=summary, permanent=permanent)
    return Change(
        transition="fail",
        job_id=job.id,
        # A cancel request wins over a retry: the executor then writes finish_cancel.
        expect={
            "status": Status.RUNNING,
            "claim_token": token,
            "attempts": job.attempts,
            "cancel_requested_at": None,
        },
        set=changes,
        record=attempt_record(job, outcome=outcome, now=now, failure=failure),
        events=_events(job, changes, now),
    )


def release(job: Job, *, token: str, now: datetime) -> Change:
    """claimed/running -> pending at once, attempt not counted: an executor shutting down
    hands back a job it could not finish (a started attempt is taken back)."""
    now = utc(now)
    changes: dict[str, Any] = {
        "status": Status.PENDING,
        "scheduled_at": now,
        "claim_token": None,
        "updated_at": now,
    }
    # A job asked to stop is cancelled (finish_cancel), not handed back.
    expect: dict[str, Any] = {
        "status": IN_FLIGHT,
        "claim_token": token,
        "cancel_requested_at": None,
    }
    if job.status is Status.RUNNING:
        expect = {
            "status": Status.RUNNING,
            "claim_token": token,
            "attempts": job.attempts,
            "cancel_requested_at": None,
        }
        changes["attempts"] = max(job.attempts - 1, 0)
    return Change(
        transition="release",
        job_id=job.id,
        expect=expect,
        set=changes,
        record=attempt_record(job, outcome=Outcome.RELEASED, now=now),
    )


def requeue(job: Job, *, now: datetime) -> Change:
    """queued -> pending (reaper): the wake-up was lost; the job never started, so the attempt
    count is unchanged."""
    now = utc(now)
    return Change(
        transition="requeue",
        job_id=job.id,
        expect={"status": Status.QUEUED, "queued_at": job.queued_at},
        set={"status": Status.PENDING, "queued_at": None, "updated_at": now},
    )


def recover(job: Job, *, now: datetime, error: str | None = None) -> Change:
    """claimed/running without a heartbeat for CLAIM_TIMEOUT -> pending or dlq (reaper).

    A running job's attempt (counted when it started) is a failed one, so a job that kills
    its executor every time ends in dlq instead of looping. A job lost while only
    ``claimed`` never started: it goes back to pending at once, uncounted. Either way a
    ``lost`` attempt is recorded. A lost running job whose cancel was requested ends
    ``cancelled`` instead (its attempt still counted). Conditioned on the exact claim token
    and heartbeat the reaper saw. ``error`` replaces the default ``lastError`` (e.g. `dev`
    recovering at start-up the jobs of the process that held its store before, which is
    known dead).
    """
    now = utc(now)
    seen = job.heartbeat_at.isoformat() if job.heartbeat_at else "never"
    if error is None:
        error = (
            f"lost: executor {job.claimed_by or '?'} stopped heartbeating (last heartbeat {seen})"
        )
    if job.status is Status.RUNNING:
        changes = _failure_set(job, now=now, error=error)
        if job.cancel_requested_at is not None:
            # A lost job whose cancel was requested ends cancelled rather than running again.
            changes.update(status=Status.CANCELLED, scheduled_at=job.scheduled_at)
            changes = mark_settling(job, changes)
    else:
        changes = {
            "status": Status.PENDING,
            "scheduled_at": now,
            "last_error": truncate_error(error),
            "claim_token": None,
            "updated_at": now,
        }
    return Change(
        transition="recover",
        job_id=job.id,
        expect={
            "status": job.status,
            "claim_token": job.claim_token,
            "heartbeat_at": job.heartbeat_at,
            "attempts": job.attempts,
        },
        set=changes,
        record=attempt_record(
            job, outcome=Outcome.LOST, now=now, failure=Failure(type="Lost", message=error)
        ),
        events=_events(job, changes, now),
    )
