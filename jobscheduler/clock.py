"""Injectable wall clocks.

Roles never call ``datetime.now`` directly: they ask a :class:`Clock`. Production uses
:class:`SystemClock`; tests use :class:`TrioClock` (wall time that follows trio's clock, so
``MockClock(autojump_threshold=0)`` drives it) or :class:`ManualClock`.
"""

from __future__ import annotations

import abc
from datetime import UTC, datetime, timedelta

import trio


class Clock(abc.ABC):
    """A source of timezone-aware UTC wall time that can also sleep until a wall time."""

    @abc.abstractmethod
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""

    async def sleep_until(self, when: datetime) -> None:
        """Sleep until ``when`` (returns at once if it is in the past)."""
        delay = (when - self.now()).total_seconds()
        if delay > 0:
            await trio.sleep(delay)


class SystemClock(Clock):
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class TrioClock(Clock):
    """Wall time = ``base`` + trio's current time; virtual under trio's ``MockClock``."""

    def __init__(self, base: datetime) -> None:
        if base.tzinfo is None:
            raise ValueError("base must be timezone-aware")
        self._base = base - timedelta(seconds=trio.current_time())

    def now(self) -> datetime:
        return self._base + timedelta(seconds=trio.current_time())


class ManualClock(Clock):
    """A clock that only moves when told to (for store and unit tests)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    async def sleep_until(self, when: datetime) -> None:
        if when > self._now:
            self._now = when
        await trio.lowlevel.checkpoint()
