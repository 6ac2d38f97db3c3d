"""Commit bookkeeping of one Kafka subscription: pure Python, no I/O, no confluent-kafka.

Per assigned partition, ``outstanding`` holds the offsets handed out (in offset order) and
``done`` those settled (acked or released). When the oldest outstanding offset is done, it
and every done offset after it are popped and ``position`` becomes the last popped offset +
1 -- the highest *contiguous* settled offset + 1, the only offset ever committed. So an
unsettled message is never committed past, and it is redelivered to whoever owns the
partition next.

Settling is the only way out of ``outstanding``, and a revoke or a loss drops the
partition's whole state: nothing stays "in flight" once its delivery was settled or its
partition left this consumer. Flow control (pause at ``max_in_flight`` unsettled, resume
below it) therefore always resumes once the holders settle what they hold.

Each :class:`PartitionState` is one assignment *generation*: a delivery remembers the state
object it came from, and a settle against a state that is no longer the current one (the
partition was revoked, maybe re-assigned since) is ignored.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

#: (topic, partition)
TP = tuple[str, int]
#: (topic, partition, offset)
TPO = tuple[str, int, int]


class PartitionState:
    """Commit bookkeeping of one assigned partition (one assignment generation)."""

    __slots__ = ("committed", "done", "next_offset", "outstanding", "position")

    def __init__(self) -> None:
        #: The offset after the last message received, or -1 (where a resume seeks to).
        self.next_offset = -1
        self.outstanding: collections.deque[int] = collections.deque()
        self.done: set[int] = set()
        #: Highest contiguous settled offset + 1, or -1 before anything was settled.
        self.position = -1
        #: The position last sent in a commit, or -1.
        self.committed = -1

    def unsettled(self) -> int:
        return len(self.outstanding) - len(self.done)

    def receive(self, offset: int) -> None:
        """Record a message handed out (offsets arrive in increasing order)."""
        self.outstanding.append(offset)
        self.next_offset = offset + 1

    def mark_done(self, offset: int) -> bool:
        """Record a settle; return True if the contiguous position moved. Idempotent."""
        if offset in self.done or offset not in self.outstanding:
            return False
        self.done.add(offset)
        moved = False
        while self.outstanding and self.outstanding[0] in self.done:
            head = self.outstanding.popleft()
            self.done.discard(head)
            self.position = head + 1
            moved = True
        return moved


class OffsetBook:
    """Every assigned partition's state, plus the subscription's flow control."""

    def __init__(self, max_in_flight: int) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.max_in_flight = max_in_flight
        self.parts: dict[TP, PartitionState] = {}
        self._paused: set[TP] = set()
        self._resume_on_room: set[TP] = set()

    # -- assignment ------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TP]) -> None:
        """Start a fresh generation for each partition (incremental: others are kept)."""
        for tp in partitions:
            self.parts[tp] = PartitionState()
            # librdkafka may carry a pause over from an earlier assignment of this partition.
            self._resume_on_room.add(tp)

    def revoke(self, partitions: Iterable[TP], *, lost: bool) -> list[TPO]:
        """Drop the partitions' state; return the positions to commit first (none if lost:
        another member may already own them, and a commit would fail anyway)."""
        offsets = []
        for tp in partitions:
            self._paused.discard(tp)
            self._resume_on_room.discard(tp)
            state = self.parts.pop(tp, None)
            if state is not None and not lost and state.position >= 0:
                offsets.append((tp[0], tp[1], state.position))
        return offsets

    def lose_all(self) -> list[TP]:
        """Drop every partition (the consumer is being replaced); returns what was held."""
        held = list(self.parts)
        self.revoke(held, lost=True)
        return held

    def is_current(self, tp: TP, state: PartitionState) -> bool:
        """Whether ``state`` is still the partition's current generation."""
        return self.parts.get(tp) is state

    # -- messages --------------------------------------------------------------------------

    def receive(self, tp: TP, offset: int) -> PartitionState | None:
        """Record a received message; its partition's state, or None if not assigned (the
        message must then be dropped: whoever owns the partition reads it again)."""
        state = self.parts.get(tp)
        if state is not None:
            state.receive(offset)
        return state

    def settle(self, tp: TP, state: PartitionState, offset: int) -> bool:
        """Mark a delivery settled; False (a no-op) if its partition was revoked since."""
        if not self.is_current(tp, state):
            return False
        state.mark_done(offset)
        return True

    def unsettled(self) -> int:
        return sum(state.unsettled() for state in self.parts.values())

    def room(self) -> int:
        """How many more deliveries may be handed out before flow control pauses."""
        return self.max_in_flight - self.unsettled()

    # -- commits ---------------------------------------------------------------------------

    def due_commits(self) -> list[TPO]:
        """Positions that moved since the last call; marks them committed.

        The mark is optimistic: a failed commit resets it (``commit_failed``), and the final
        commit and the commit on revoke re-send every known position regardless of it.
        """
        offsets = []
        for (topic, partition), state in self.parts.items():
            if state.position > state.committed:
                offsets.append((topic, partition, state.position))
                state.committed = state.position
        return offsets

    def all_positions(self) -> list[TPO]:
        return [
            (topic, partition, state.position)
            for (topic, partition), state in self.parts.items()
            if state.position >= 0
        ]

    def commit_failed(self, partitions: Iterable[TP]) -> None:
        """Make the next ``due_commits`` send these partitions' positions again."""
        for tp in partitions:
            state = self.parts.get(tp)
            if state is not None:
                state.committed = -1

    # -- flow control ----------------------------------------------------------------------

    def flow_control(self) -> tuple[list[TP], list[TPO]]:
        """Partitions to pause, and partitions to resume with the offset to seek to.

        At ``max_in_flight`` unsettled deliveries every assigned partition is paused;
        below it, every paused one (and every newly assigned one) is resumed. A resumed
        partition carries the offset after its last received message, or -1 for "no seek":
        pausing drops librdkafka's prefetched messages, and seeking there on resume makes
        it fetch again at once instead of at its fetcher's next idle wake-up.
        """
        if self.unsettled() >= self.max_in_flight:
            to_pause = [tp for tp in self.parts if tp not in self._paused]
            self._paused.update(to_pause)
            return to_pause, []
        to_resume = (self._paused | self._resume_on_room) & self.parts.keys()
        self._paused.clear()
        self._resume_on_room.clear()
        return [], [(t, p, self.parts[t, p].next_offset) for t, p in sorted(to_resume)]

    @property
    def paused(self) -> frozenset[TP]:
        return frozenset(self._paused)
