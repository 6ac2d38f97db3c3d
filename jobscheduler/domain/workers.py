"""Presence records: who is running right now (the Overview's leader and live executors).

Every scheduler and executor process writes a small :class:`WorkerBeat` into the job store
every :data:`BEAT_INTERVAL` (see :mod:`jobscheduler.roles.presence`); a record not renewed for
:data:`MISSED_BEATS` beats has expired and is no longer listed (and is pruned by the next
beat of any process). A clean shutdown deletes its own record at once.

Why records in the store, and not an elector query for the leader: the API role holds no
elector (in production it is a separate process with no etcd client), and the store is the
one thing every role and the API already share. The scheduler records ``leader`` as its own
elector told it (``lead``'s ``on_leadership``), and beats at once when that changes, so the
Overview's leader is at most one beat stale; during the moment two schedulers overlap (see
DESIGN "etcd election") both records say ``leader: true`` and the Overview shows both.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from .model import format_time

#: Seconds between two beats of one process.
BEAT_INTERVAL = 5.0
#: A record expires after this many beats were missed.
MISSED_BEATS = 3

#: The roles that write presence records.
ROLES = ("scheduler", "executor")


def expiry(seen_at: datetime, interval: float = BEAT_INTERVAL) -> datetime:
    """When a record written at ``seen_at`` expires."""
    return seen_at + timedelta(seconds=interval * MISSED_BEATS)


@attrs.frozen(kw_only=True)
class WorkerBeat:
    """One process's latest beat (one record per role and process)."""

    #: ``<role>:<worker id>`` (WORKER_ID, default ``<host>-<pid>``): unique per process.
    id: str
    role: str
    host: str
    pid: int
    #: Job types an executor consumes (empty for a scheduler).
    job_types: tuple[str, ...] = ()
    #: Jobs an executor is running right now.
    in_flight: int = 0
    #: Jobs an executor can run at once (its slots; 0 for a scheduler): how far ahead the
    #: leader claims jobs of its types.
    capacity: int = 0
    #: A scheduler that holds the leadership (by its own elector's word).
    leader: bool = False
    started_at: datetime
    seen_at: datetime
    expires_at: datetime

    def to_json(self, now: datetime) -> dict[str, Any]:
        """The record as ``GET /stats/overview`` shows it."""
        return {
            "id": self.id,
            "role": self.role,
            "host": self.host,
            "pid": self.pid,
            "jobTypes": list(self.job_types),
            "inFlight": self.in_flight,
            "capacity": self.capacity,
            "leader": self.leader,
            "startedAt": format_time(self.started_at),
            "seenAt": format_time(self.seen_at),
            "secondsSinceSeen": round(max((now - self.seen_at).total_seconds(), 0.0), 3),
        }


def beat_to_fields(beat: WorkerBeat) -> Mapping[str, Any]:
    """The stored fields of a beat, by attribute name (adapters rename and encode them)."""
    return attrs.asdict(beat, recurse=False)


__all__ = ["BEAT_INTERVAL", "MISSED_BEATS", "ROLES", "WorkerBeat", "beat_to_fields", "expiry"]
