"""The ledger of a cron template: one record per fire time, saying what became of it.

A record is keyed by (template id, fire time) and never changes once written: the first
writer wins, so two schedulers that briefly both lead record each fire time once. The
record is written *before* the scheduler acts on it and is the decision itself: a fire time
whose stored record says ``spawned`` (or ``buffered``) is spawned with the record's run id
(an idempotent insert keyed on the fire time); one whose record says ``skipped`` is not.
The outcome of a run is not stored here: readers join it with the run's status.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

import attrs


class OccurrenceStatus(enum.StrEnum):
    """What became of one fire time."""

    #: A run was spawned for it (``run_id``).
    SPAWNED = "spawned"
    #: Held back by ``overlap="buffer_one"`` until the previous run finished; its run
    #: (``run_id``) is spawned then.
    BUFFERED = "buffered"
    #: No run (``reason`` says why).
    SKIPPED = "skipped"


class SkipReason(enum.StrEnum):
    """Why a fire time got no run of its own."""

    #: ``catchUp="none"``: it was missed (not reached within the on-time grace).
    MISSED = "missed"
    #: ``catchUp="all"``: it is older than ``catchUpWindow``.
    OUTSIDE_CATCH_UP_WINDOW = "outside_catch_up_window"
    #: ``catchUp="one"``: it was missed and folded into the run of an older fire time.
    COALESCED = "coalesced"
    #: ``dstGap="skip"``: its wall-clock time does not exist (spring forward). Recorded at
    #: the first instant after the gap.
    DST_GAP = "dst_gap"
    #: The template was paused (recorded when it is resumed).
    PAUSED = "paused"
    #: The overlap policy: the previous run had not finished (``skip``, or a fire time
    #: beyond the one ``buffer_one`` holds), or, under ``cancel_previous``, a newer fire time
    #: due in the same scheduler pass replaced it before it could run.
    OVERLAP = "overlap"


@attrs.frozen(kw_only=True)
class Occurrence:
    """One fire time of one template, as recorded."""

    template_id: str
    tenant_id: str
    #: The fire time (aware UTC): with ``template_id``, the record's unique key.
    fire_at: datetime
    status: OccurrenceStatus
    #: When the scheduler recorded it (for a spawned fire time: its spawn time).
    recorded_at: datetime
    #: The run's job id (spawned and buffered records).
    run_id: str | None = None
    #: Why there is no run (skipped records).
    reason: SkipReason | None = None
    #: ``overlap="cancel_previous"``: the previous run, unfinished at this fire time, that
    #: this fire time cancels (spawned records only). Whichever scheduler acts on the record
    #: cancels this run, so two schedulers cancel the same one.
    cancelled_run_id: str | None = None

    @property
    def lateness(self) -> timedelta | None:
        """How long after its fire time the run was spawned (spawned records only)."""
        if self.status is not OccurrenceStatus.SPAWNED:
            return None
        return max(self.recorded_at - self.fire_at, timedelta(0))
