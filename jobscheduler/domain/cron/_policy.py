"""A cron template's schedule settings: zone, DST policy, catch-up policy, jitter.

One frozen value per template (``Job.cron_policy``), parsed from the create request here,
stored by both stores through :meth:`CronPolicy.to_storage` / :meth:`CronPolicy.from_storage`,
and shown in the template's JSON through :meth:`CronPolicy.to_json`. A template stored before
these settings existed has none and behaves as :data:`DEFAULT_POLICY` (UTC, today's rules).
"""

from __future__ import annotations

import enum
import hashlib
import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from jobscheduler.domain.durations import parse_duration
from jobscheduler.errors import ValidationError

from ._expression import min_interval
from ._fires import DstFold, DstGap, Fire, iter_fires
from ._zones import zone

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

DEFAULT_CATCH_UP_WINDOW = timedelta(hours=1)
MIN_CATCH_UP_WINDOW = timedelta(seconds=1)
MAX_CATCH_UP_WINDOW = timedelta(days=7)

#: The request/JSON fields of a template's schedule settings.
POLICY_FIELDS = frozenset(
    {"timezone", "dstGap", "dstFold", "catchUp", "catchUpWindow", "jitter", "overlap"}
)


class CatchUp(enum.StrEnum):
    """What happens to fire times that passed while nothing fired them (downtime, pause)."""

    #: Skip missed fire times; only a fire time reached on time runs.
    NONE = "none"
    #: One run for all of them (keyed on the oldest). The default, and the old behaviour.
    ONE = "one"
    #: One run per missed fire time within ``catchUpWindow``, oldest first.
    ALL = "all"


class Overlap(enum.StrEnum):
    """What a fire time does while the template's previous run has not finished."""

    #: Spawn it anyway: runs may overlap. The default, and the old behaviour.
    ALLOW = "allow"
    #: Skip it (recorded in the ledger with reason ``overlap``).
    SKIP = "skip"
    #: Hold it (one at most) and spawn it once the previous run has finished; further fire
    #: times while one is held are skipped.
    BUFFER_ONE = "buffer_one"
    #: Cancel the previous run if it has not finished (a pending/queued/claimed one at once,
    #: a running one by a cancel request its executor honours within a heartbeat) and spawn
    #: this one.
    CANCEL_PREVIOUS = "cancel_previous"


@attrs.frozen(kw_only=True)
class CronPolicy:
    timezone: str = "UTC"
    dst_gap: DstGap = DstGap.SHIFT
    dst_fold: DstFold = DstFold.FIRST
    catch_up: CatchUp = CatchUp.ONE
    catch_up_window: timedelta = DEFAULT_CATCH_UP_WINDOW
    jitter: timedelta = timedelta(0)
    overlap: Overlap = Overlap.ALLOW

    def fires(self, expression: str, after: datetime, *, gap_skips: bool = False) -> Iterator[Fire]:
        """This template's fire times strictly after ``after`` (see :func:`iter_fires`)."""
        return iter_fires(
            expression,
            after,
            timezone=self.timezone,
            dst_gap=self.dst_gap,
            dst_fold=self.dst_fold,
            gap_skips=gap_skips,
        )

    def next_fire(self, expression: str, after: datetime) -> datetime:
        return next(self.fires(expression, after)).at

    def local(self, instant: datetime) -> datetime:
        """``instant`` in this template's zone (aware)."""
        return instant.astimezone(zone(self.timezone))

    def to_storage(self) -> dict[str, Any]:
        """The stored form (a JSON object / BSON subdocument; durations in milliseconds)."""
        return {
            "timezone": self.timezone,
            "dstGap": self.dst_gap.value,
            "dstFold": self.dst_fold.value,
            "catchUp": self.catch_up.value,
            "catchUpWindowMs": _millis(self.catch_up_window),
            "jitterMs": _millis(self.jitter),
            "overlap": self.overlap.value,
        }

    @classmethod
    def from_storage(cls, doc: Mapping[str, Any]) -> CronPolicy:
        """Read :meth:`to_storage`'s form; a missing key takes its default."""
        default = DEFAULT_POLICY
        return cls(
            timezone=str(doc.get("timezone", default.timezone)),
            dst_gap=DstGap(doc.get("dstGap", default.dst_gap)),
            dst_fold=DstFold(doc.get("dstFold", default.dst_fold)),
            catch_up=CatchUp(doc.get("catchUp", default.catch_up)),
            catch_up_window=timedelta(
                milliseconds=int(doc.get("catchUpWindowMs", _millis(default.catch_up_window)))
            ),
            jitter=timedelta(milliseconds=int(doc.get("jitterMs", 0))),
            overlap=Overlap(doc.get("overlap", default.overlap)),
        )

    def to_json(self) -> dict[str, Any]:
        """The template JSON's schedule fields (``jitter`` only when set)."""
        out: dict[str, Any] = {
            "timezone": self.timezone,
            "dstGap": self.dst_gap.value,
            "dstFold": self.dst_fold.value,
            "catchUp": self.catch_up.value,
            "catchUpWindow": format_duration(self.catch_up_window),
            "overlap": self.overlap.value,
        }
        if self.jitter:
            out["jitter"] = format_duration(self.jitter)
        return out


DEFAULT_POLICY = CronPolicy()


def _millis(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


def format_duration(delta: timedelta) -> str:
    """``1h``, ``90m``, ``45s`` or ``1500ms``: the largest unit that is exact."""
    millis = _millis(delta)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if millis and millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"


def parse_duration_field(value: Any, field: str) -> timedelta:
    """A duration given as ``"90s"``/``"5m"``/``"1h"``/``"500ms"`` or a number of seconds."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValidationError(f"{field}: must be a duration such as 30s, 5m or 1h")
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError:
            raise ValidationError(
                f"{field}: not a duration: {value!r} (use e.g. 500ms, 30s, 5m, 1h)"
            ) from None
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValidationError(f"{field}: must be a non-negative duration")
    if seconds > MAX_CATCH_UP_WINDOW.total_seconds() * 100:
        raise ValidationError(f"{field}: too long")
    return timedelta(milliseconds=round(seconds * 1000))


def _choice(body: Mapping[str, Any], field: str, kind: type[enum.StrEnum], default: Any) -> Any:
    value = body.get(field)
    if value is None:
        return default
    allowed = [m.value for m in kind]
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(f"{field}: must be one of {', '.join(allowed)}")
    return kind(value)


def parse_policy(body: Mapping[str, Any], expression: str) -> CronPolicy:
    """Validate a create request's schedule fields for the (valid) ``expression``."""
    timezone = body.get("timezone")
    if timezone is None:
        timezone = DEFAULT_POLICY.timezone
    if not isinstance(timezone, str):
        raise ValidationError("timezone: must be an IANA zone name such as Europe/Paris")
    zone(timezone)
    window = DEFAULT_POLICY.catch_up_window
    if body.get("catchUpWindow") is not None:
        window = parse_duration_field(body["catchUpWindow"], "catchUpWindow")
        if not MIN_CATCH_UP_WINDOW <= window <= MAX_CATCH_UP_WINDOW:
            raise ValidationError(
                f"catchUpWindow: must be between {format_duration(MIN_CATCH_UP_WINDOW)} "
                f"and {format_duration(MAX_CATCH_UP_WINDOW)}"
            )
    jitter = timedelta(0)
    if body.get("jitter") is not None:
        jitter = parse_duration_field(body["jitter"], "jitter")
        interval = min_interval(expression)
        if jitter > interval:
            raise ValidationError(
                f"jitter: must not exceed the schedule's interval ({format_duration(interval)})"
            )
    overlap = _choice(body, "overlap", Overlap, DEFAULT_POLICY.overlap)
    return CronPolicy(
        timezone=timezone,
        dst_gap=_choice(body, "dstGap", DstGap, DEFAULT_POLICY.dst_gap),
        dst_fold=_choice(body, "dstFold", DstFold, DEFAULT_POLICY.dst_fold),
        catch_up=_choice(body, "catchUp", CatchUp, DEFAULT_POLICY.catch_up),
        catch_up_window=window,
        jitter=jitter,
        overlap=overlap,
    )


def jitter_offset(template_id: str, fire_at: datetime, jitter: timedelta) -> timedelta:
    """A deterministic offset in ``[0, jitter)`` for one fire time of one template: the
    same (template, fire time) always gets the same offset, whichever scheduler asks."""
    span = _millis(jitter)
    if span <= 0:
        return timedelta(0)
    nanos = (fire_at.astimezone(UTC) - _EPOCH) // timedelta(microseconds=1) * 1000
    digest = hashlib.blake2b(f"{template_id}|{nanos}".encode(), digest_size=8).digest()
    return timedelta(milliseconds=int.from_bytes(digest, "big") % span)
