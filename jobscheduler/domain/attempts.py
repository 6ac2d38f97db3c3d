"""What a run leaves behind: a handler's result and the record of every attempt.

Attempt records live *beside* the job, not inside it (their own table / collection keyed by
job id): a job document stays small however often it is retried. Records are append-only
and bounded per run by construction: at most one record per (run, attempt number,
outcome), a repeated write of the same key keeps the first. A job's first run is run 0;
each retry by a user starts the next (:attr:`jobscheduler.domain.model.Job.run`), whose attempts
count from 1 again. Attempt numbers are at most ``maxAttempts`` (released attempts are not
counted, so they reuse their number), so a run has at most ``len(Outcome) * maxAttempts``
records. Records older than the retention (``ATTEMPT_RETENTION``) are pruned by the reaper.

A record is written by the store together with the transition that ends the attempt
(:attr:`jobscheduler.domain.states.Change.record`), only when that transition applies.
"""

from __future__ import annotations

import enum
import json
import traceback as tb
from datetime import datetime
from typing import Any

import attrs

from jobscheduler.errors import ResultError

from .model import format_time, optional_time, present

#: A handler's return value, JSON-encoded, may be at most this many bytes.
MAX_RESULT_BYTES = 64 * 1024
#: How much of a failure's traceback is kept (its tail: the frames nearest the error).
MAX_TRACEBACK_CHARS = 4000
#: An error message longer than this is truncated.
MAX_MESSAGE_CHARS = 2000


class Outcome(enum.StrEnum):
    """How one attempt ended."""

    #: The handler returned; its result (if any) is on the job.
    COMPLETED = "completed"
    #: The handler raised (or returned something that is not a storable result).
    FAILED = "failed"
    #: The handler ran past its time limit and was stopped.
    TIMED_OUT = "timed_out"
    #: The executor stopped heartbeating; the reaper took the job back.
    LOST = "lost"
    #: The executor shut down and handed the job back; the attempt is not counted.
    RELEASED = "released"
    #: A user cancelled the running job; its executor stopped the handler.
    CANCELLED = "cancelled"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@attrs.frozen(kw_only=True)
class Failure:
    """Why an attempt failed: the error's type, message and the tail of its traceback."""

    type: str
    message: str
    traceback: str | None = None
    #: The message alone says what happened ("timed out after 30s"): ``lastError`` shows
    #: it without the type.
    bare: bool = False

    @classmethod
    def from_exception(cls, exc: BaseException) -> Failure:
        trace = "".join(tb.format_exception(exc))
        if len(trace) > MAX_TRACEBACK_CHARS:
            trace = "…" + trace[-(MAX_TRACEBACK_CHARS - 1) :]
        return cls(
            type=type(exc).__name__,
            message=_clip(str(exc), MAX_MESSAGE_CHARS),
            traceback=trace,
        )

    def summary(self) -> str:
        """``Type: message`` (the type alone without a message, the message alone when
        ``bare``), as the job's ``lastError`` shows it."""
        if self.bare and self.message:
            return self.message
        return f"{self.type}: {self.message}" if self.message else self.type


@attrs.frozen(kw_only=True)
class Attempt:
    """One attempt at running a job, as recorded when it ended."""

    job_id: str
    #: The job's run (:attr:`jobscheduler.domain.model.Job.run`): 0, then 1 after the first retry.
    run: int = 0
    number: int
    outcome: Outcome
    worker: str | None = None
    started_at: datetime | None = None
    finished_at: datetime
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None

    @property
    def key(self) -> str:
        """The record's unique key: one record per (job, run, attempt number, outcome).
        The first run's keys leave the run out (as records were keyed before runs)."""
        if self.run == 0:
            return f"{self.job_id}:{self.number}:{self.outcome.value}"
        return f"{self.job_id}:{self.run}:{self.number}:{self.outcome.value}"


def attempt_to_json(attempt: Attempt) -> dict[str, Any]:
    """The HTTP shape of an attempt record (absent optional fields are omitted)."""
    return {
        "run": attempt.run,
        "number": attempt.number,
        "outcome": attempt.outcome.value,
        **present(worker=attempt.worker, startedAt=optional_time(attempt.started_at)),
        "finishedAt": format_time(attempt.finished_at),
        **present(
            errorType=attempt.error_type,
            errorMessage=attempt.error_message,
            traceback=attempt.traceback,
        ),
    }


def encode_result(value: Any) -> str | None:
    """The JSON text stored for a handler's return value (None for None).

    Raises ResultError if the value is not JSON-serialisable (NaN and infinities included)
    or its encoding is longer than :data:`MAX_RESULT_BYTES`.
    """
    if value is None:
        return None
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ResultError(f"handler result is not JSON-serialisable: {exc}") from None
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        raise ResultError(
            f"handler result is {size} bytes of JSON, more than the {MAX_RESULT_BYTES} allowed"
        )
    return text


def decode_result(text: str | None) -> Any:
    """The inverse of :func:`encode_result` (stores keep results as JSON text)."""
    return None if text is None else json.loads(text)
