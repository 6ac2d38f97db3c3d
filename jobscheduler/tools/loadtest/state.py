"""What a ``jobscheduler loadtest`` run asked for and what it has seen so far.

The senders and the poller (:mod:`jobscheduler.tools.loadtest.traffic`) record into one
:class:`LoadState` as things happen; the report (:mod:`jobscheduler.tools.loadtest.report`)
is made from it, so an interrupted run can still be summarised.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import attrs
import trio

from jobscheduler.domain.model import MAX_LIST_LIMIT


@attrs.frozen(kw_only=True)
class Options:
    url: str
    rate: float
    duration: float
    job_type: str
    payload: dict[str, Any]
    tenant: str
    timeout: float
    concurrency: int
    key: str | None = None

    @property
    def total(self) -> int:
        """Jobs on the timetable: one every ``1/rate`` seconds for ``duration``."""
        return max(1, round(self.rate * self.duration))


@attrs.frozen(kw_only=True)
class Accepted:
    """One job the API acknowledged with 201."""

    index: int
    job_id: str
    tenant: str
    sent_at: datetime  # client wall clock just before the POST went out


@attrs.define
class LoadState:
    """What the senders and the poller have seen so far (one trio thread; no locks)."""

    options: Options
    run_id: str
    started: float = 0.0
    sent: int = 0
    in_flight: int = 0
    accepted: dict[str, Accepted] = attrs.field(factory=dict)
    errors: Counter[str] = attrs.field(factory=Counter)
    error_samples: dict[str, str] = attrs.field(factory=dict)
    ack_latencies: list[float] = attrs.field(factory=list)
    send_lags: list[float] = attrs.field(factory=list)
    finished: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    poll_errors: Counter[str] = attrs.field(factory=Counter)
    sending_done: bool = False
    interrupted: bool = False
    first_send_at: datetime | None = None
    unfinished_statuses: Counter[str] = attrs.field(factory=Counter)
    all_finished: trio.Event = attrs.field(factory=trio.Event)

    def tenant_for(self, index: int) -> str:
        """The run's tenant; runs of more than MAX_LIST_LIMIT jobs use one tenant per block
        of MAX_LIST_LIMIT, so one list request per status can always see a whole block."""
        base = f"{self.options.tenant}-{self.run_id}"
        if self.options.total <= MAX_LIST_LIMIT:
            return base
        return f"{base}-{index // MAX_LIST_LIMIT}"

    def tenant_label(self) -> str:
        base = f"{self.options.tenant}-{self.run_id}"
        return base if self.options.total <= MAX_LIST_LIMIT else f"{base}-<block>"

    def unfinished_tenants(self) -> list[str]:
        return sorted(
            {a.tenant for job_id, a in self.accepted.items() if job_id not in self.finished}
        )

    def record_error(self, key: str, detail: str) -> None:
        self.errors[key] += 1
        self.error_samples.setdefault(key, " ".join(detail.split())[:200])
