"""Aggregate a repeated log event into one line per interval, with a count.

A dependency that is down makes the same error happen many times a second (librdkafka
retries every connection, every pick fails the same way). One line per ``interval`` says as
much, and its ``repeated`` field counts the lines held back since the previous one:

    throttle = LogThrottle(log, interval=10.0)
    throttle.log(logging.ERROR, "store failed while picking jobs", key="pick", extra={...})

:class:`ThrottlingFilter` does the same for records a library emits itself (librdkafka's
``logger``). Both are thread-safe: librdkafka logs from its own threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

#: Default aggregation interval, in seconds.
INTERVAL = 10.0


class Throttle:
    """Decides, per key, whether an event is logged now; counts the ones held back."""

    def __init__(self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic):
        if interval < 0:
            raise ValueError("interval must be >= 0")
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        # key -> (time of the last line logged, events held back since)
        self._seen: dict[Hashable, tuple[float, int]] = {}

    def admit(self, key: Hashable) -> int | None:
        """None to hold this event back; otherwise log it, and the int is how many events
        of ``key`` were held back since the previous line."""
        now = self._clock()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < self._interval:
                self._seen[key] = (last[0], last[1] + 1)
                return None
            self._seen[key] = (now, 0)
            return last[1] if last is not None else 0

    def __contains__(self, key: Hashable) -> bool:
        """Whether ``key`` was admitted before and not reset since."""
        with self._lock:
            return key in self._seen

    def reset(self, key: Hashable) -> int:
        """Forget ``key`` (the trouble is over); returns how many events were held back."""
        with self._lock:
            last = self._seen.pop(key, None)
        return last[1] if last is not None else 0


class LogThrottle:
    """A logger front that emits each key at most once per interval (see the module doc)."""

    def __init__(
        self,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._throttle = Throttle(interval, clock)

    def log(
        self,
        level: int,
        msg: str,
        *,
        key: Hashable | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> bool:
        """Log ``msg`` unless ``key`` (default: level and msg) was logged within the
        interval; returns whether a line was written."""
        repeated = self._throttle.admit((level, msg) if key is None else key)
        if repeated is None:
            return False
        fields = dict(extra or {})
        if repeated:
            fields["repeated"] = repeated
        self._logger.log(level, msg, extra=fields)
        return True

    def recovered(
        self,
        key: Hashable,
        msg: str,
        *,
        level: int = logging.INFO,
        extra: Mapping[str, Any] | None = None,
    ) -> bool:
        """The trouble behind ``key`` is over: log ``msg`` once with the count of lines
        held back, if ``key`` was being throttled; returns whether a line was written."""
        if key not in self._throttle:
            return False
        repeated = self._throttle.reset(key)
        self._logger.log(level, msg, extra={**(extra or {}), "repeated": repeated})
        return True


class ThrottlingFilter(logging.Filter):
    """A logging filter passing each (level, message template, first argument) at most once
    per interval; a passed record's message gains the count of records held back.

    Attached to librdkafka's logger, whose records are ``"%s [%s] %s"`` with the facility
    and the client's name first, this gives one line per facility and client per interval.
    """

    def __init__(self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self._throttle = Throttle(interval, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        key = (record.levelno, record.msg, args[:2])
        repeated = self._throttle.admit(key)
        if repeated is None:
            return False
        if repeated:
            record.msg = f"{record.msg} (and {repeated} more like it since the last line)"
        return True
