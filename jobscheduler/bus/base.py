"""The Bus port: wake-up messages only (``jobId``, ``jobType``, ``priority``, and for a job
claimed ahead of its start, ``notBefore``), never job state.

A lost message costs latency (the reaper re-pends the job after QUEUED_TIMEOUT); a duplicated
or stale one is harmless (the executor's pick is a conditional update). Every adapter passes
``tests/contract/test_bus_contract.py``.
"""

from __future__ import annotations

import abc
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from jobscheduler.errors import BusError

DLQ_TOPIC = "jobs.dlq"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)

# Every name below takes the deployment's ``prefix`` (KAFKA_TOPIC_PREFIX, empty by default), so
# several deployments -- or test runs -- can share one broker without reading each other's
# wake-ups.


def dispatch_topic(job_type: str, prefix: str = "") -> str:
    """The per-type topic the scheduler publishes to and ``executor-<jobType>`` consumes."""
    return f"{prefix}jobs.dispatch.{job_type}"


def dlq_topic(prefix: str = "") -> str:
    return f"{prefix}{DLQ_TOPIC}"


def consumer_group(job_type: str, prefix: str = "") -> str:
    return f"{prefix}executor-{job_type}"


@attrs.frozen(kw_only=True)
class WakeUp:
    """A dispatch message: a job is queued and should be picked.

    ``not_before`` (``notBefore``, Unix milliseconds) is set on a job the leader claimed
    ahead of its start under a rate limit (``RATE_AHEAD``): the executor picks it at that
    instant, not before, and only if the job is still queued for that instant (a wake-up
    of an earlier claim of the job is stale).
    """

    job_id: str
    job_type: str
    priority: int
    not_before: datetime | None = None

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "jobId": self.job_id,
            "jobType": self.job_type,
            "priority": self.priority,
        }
        if self.not_before is not None:
            body["notBefore"] = (self.not_before - _EPOCH) // _MILLISECOND
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> WakeUp:
        """Parse a message; raise BusError for anything that is not a valid wake-up."""
        try:
            raw: Any = json.loads(data)
            job_id, job_type, priority = raw["jobId"], raw["jobType"], raw.get("priority", 0)
            millis = raw.get("notBefore")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise BusError(f"malformed wake-up message: {exc}") from None
        if not isinstance(job_id, str) or not isinstance(job_type, str):
            raise BusError("malformed wake-up message: jobId/jobType must be strings")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise BusError("malformed wake-up message: priority must be an integer")
        if millis is not None and (isinstance(millis, bool) or not isinstance(millis, int)):
            raise BusError("malformed wake-up message: notBefore must be Unix milliseconds")
        not_before = None if millis is None else _EPOCH + millis * _MILLISECOND
        return cls(job_id=job_id, job_type=job_type, priority=priority, not_before=not_before)


@attrs.frozen(kw_only=True)
class DeadLetter:
    """Published on ``jobs.dlq`` when a job is dead-lettered, for external inspection."""

    job_id: str
    job_type: str
    tenant_id: str
    attempts: int
    last_error: str | None

    def encode(self) -> bytes:
        return json.dumps(
            {
                "jobId": self.job_id,
                "jobType": self.job_type,
                "tenantId": self.tenant_id,
                "attempts": self.attempts,
                "lastError": self.last_error,
            },
            separators=(",", ":"),
        ).encode()


class Delivery(abc.ABC):
    """One received wake-up. Every delivery must be *settled*, exactly one of:

    - ``ack`` once its job's outcome is durable, or the job is no longer the receiver's
      (stale or duplicate wake-up);
    - ``release`` when the receiver cannot tell (the store failed or timed out): the
      message stops counting against the subscription's in-flight limit and its offset
      may be committed past. The store is the truth -- the reaper re-pends a job left
      ``queued`` after QUEUED_TIMEOUT and one left ``claimed``/``running`` after
      CLAIM_TIMEOUT -- so nothing is lost by letting the bus move on.

    An unsettled delivery holds its partition's commits back and its in-flight slot
    forever, so every code path that receives one must settle it.
    """

    message: WakeUp

    @abc.abstractmethod
    async def ack(self) -> None:
        """Mark this message done. Adapters commit offsets only up to contiguous settles.

        Idempotent. Ack inside the subscription's ``async with``: an ack after it closed
        (or after its partition moved to another consumer) is a no-op, and the message
        may be delivered again.
        """

    @abc.abstractmethod
    async def release(self) -> None:
        """Settle without success: free the in-flight slot and let the offset advance.

        Idempotent, and a no-op after ``ack`` (the first settle wins). Same scope rule as
        ``ack``. The bus does not redeliver a released message; the store's sweeps
        recover its job.
        """


class Subscription(abc.ABC):
    """Messages of one job type for one consumer group."""

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[Delivery]:
        """Deliveries in arrival order; iteration ends when the bus is closed.

        Raises BusError if the adapter can no longer consume. A receive cancelled by a
        timeout loses nothing, and the subscription stays usable.
        """

    def receive_ready(self, limit: int) -> list[Delivery]:
        """Up to ``limit`` further deliveries that have already arrived, without waiting.

        Lets a consumer that just received one message take the ones queued behind it and
        settle them in one store round trip. Empty when nothing is waiting (or, here in the
        base class, for an adapter that cannot tell).
        """
        return []

    def problem(self) -> str | None:
        """Why this subscription is not a working consumer right now (e.g. it has not been
        a member of its consumer group for longer than a rebalance takes), or None.

        A liveness signal: the adapter tries to recover by itself first, so a problem here
        means that has not worked for a while and a restart may be the remedy.
        """
        return None


class Bus(abc.ABC):
    """Carries wake-ups from the scheduler to executors, and dead letters to ``jobs.dlq``."""

    #: Whether published wake-ups survive a restart of this process. When False (the
    #: in-process bus), every job still ``queued`` at start-up has lost its wake-up for sure,
    #: and the reaper re-pends it at once instead of after QUEUED_TIMEOUT.
    durable: bool = True

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect. No I/O happens before this."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Flush what can be flushed and disconnect. Safe to call twice."""

    @abc.abstractmethod
    async def publish(self, messages: Sequence[WakeUp]) -> None:
        """Publish each message to ``dispatch_topic(message.job_type)``.

        Returns once every message is durably accepted; raises BusError if any was not
        (some may still have been delivered: wake-ups are idempotent).
        """

    @abc.abstractmethod
    async def publish_dead_letter(self, letter: DeadLetter) -> None:
        """Publish to ``jobs.dlq``; raises BusError on failure."""

    @abc.abstractmethod
    def subscribe(self, job_type: str) -> AbstractAsyncContextManager[Subscription]:
        """Consume ``dispatch_topic(job_type)`` in group ``consumer_group(job_type)``."""
