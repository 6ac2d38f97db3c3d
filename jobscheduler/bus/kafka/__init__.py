"""The production bus: Kafka through confluent-kafka (librdkafka), driven from trio threads.

Topics: ``jobs.dispatch.<jobType>`` (key = jobId, value = ``WakeUp.encode()``) and
``jobs.dlq`` (key = jobId), created on first use (``partitions``, replication 1). Consumers of
a type share the group ``executor-<jobType>``.

Threading. confluent-kafka is blocking, so every call into it runs through
``trio.to_thread.run_sync`` with one of the bus's own limiters: ``_io_limiter`` for the
producer and the AdminClient, ``_poll_limiter`` for consumers (so a subscription's poll loop
never starves publishing or trio's default pool). Each call is short (polls last at most
``poll_timeout``; long waits are loops of short hops), so cancellation is prompt. This module
starts no thread of its own; each consumer is only ever called by one hop at a time.

Publishing. A batch is produced in one hop and its delivery reports are awaited in hops of
at most 0.25 s; ``publish`` returns when the broker acknowledged every message (``acks=all``,
idempotent producer) and raises BusError if any failed or timed out (``message_timeout``).

Consuming. ``subscribe()`` opens a nursery holding one poller task. The poller polls all the
time, whether or not the iterator's consumer keeps up, so the member is never evicted for
exceeding ``max.poll.interval.ms``; it hands deliveries over a bounded memory channel. With
``max_in_flight_per_subscription`` deliveries unsettled it pauses its partitions and keeps
serving the group (a zero-timeout poll at least every ``poll_timeout``); the first settle
(ack or release) wakes it to resume. Pausing drops librdkafka's prefetched messages, so a
resumed partition seeks to the offset after the last message received: fetching restarts
at once, nothing skipped. A consumer that stops being a working group member is replaced
(see ``consumer``).

Commit tracking (``offsets``, pure; touched only on the trio thread): per assigned
partition, the highest *contiguous* settled offset + 1 is the only offset committed.
The poller commits a position (asynchronously) when it moved, so an unsettled message
is never committed past and is redelivered to whoever owns the partition next. Rebalance
callbacks run inside ``poll()`` on the worker thread and hop back to the trio thread
(``trio.from_thread.run_sync``) for the bookkeeping: on revoke the contiguous positions are
committed synchronously and the partitions' state is dropped, so late acks of their
deliveries are no-ops and their still-buffered deliveries are skipped; on loss the state is
dropped without a commit. A malformed message counts as settled at once. A released
delivery (the executor could not learn its job's outcome) is settled too: the store, not
the bus, is the truth, and the reaper re-pends a job left ``queued``. Leaving the ``async
with`` stops the poller, commits the contiguous positions and closes the consumer (bounded,
shielded from cancellation).

Group protocol. ``group_protocol="consumer"`` (KIP-848, Kafka >= 4.0) is the default; see
``KafkaBus._group_protocol_config`` for why. ``"classic"`` uses cooperative-sticky.

Modules: ``offsets`` (pure commit bookkeeping), ``membership`` (pure watchdog decisions),
``consumer`` (a subscription), ``group`` (its consumer's rebalance, commit and statistics
callbacks), ``producer``, ``admin`` (topics, group members), ``adapter`` (``KafkaBus``).
"""

from .adapter import KafkaBus as KafkaBus
from .admin import delete_prefixed_topics as delete_prefixed_topics

__all__ = ["KafkaBus", "delete_prefixed_topics"]
