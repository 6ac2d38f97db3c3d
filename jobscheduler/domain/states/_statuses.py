"""The sets of statuses the rest of the code asks about, each defined once.

Every status is in exactly one of :data:`UNFINISHED` and :data:`FINAL`, or is ``paused`` (a
template held by a user: neither still to run nor ended). The store adapters compile these
sets into their queries and indexes (SQL ``IN`` lists, Mongo ``$in``, Python membership);
nothing spells them out again.
"""

from __future__ import annotations

from jobscheduler.domain.model import Status

#: Still to run or running: what a tenant's quota of unfinished jobs counts (a pending cron
#: template included; a paused one not) and what a cron template's overlap policy waits for
#: (a failed attempt waiting for its retry included).
#: A workflow step waiting for its parents is unfinished too.
UNFINISHED: tuple[Status, ...] = (
    Status.WAITING,
    Status.PENDING,
    Status.QUEUED,
    Status.CLAIMED,
    Status.RUNNING,
)
#: Held by an executor (claim token, heartbeat): what the reaper recovers after
#: ``CLAIM_TIMEOUT`` without a heartbeat, and what an executor hands back at shutdown.
IN_FLIGHT: tuple[Status, ...] = (Status.CLAIMED, Status.RUNNING)
#: Claimed by the scheduler and not yet ended: a job holds its flow-control slots (its
#: concurrency key's, its type's) in these, and every transition out of them frees them.
HOLDING_SLOTS: tuple[Status, ...] = (Status.QUEUED, Status.CLAIMED, Status.RUNNING)
#: Ended: no role moves such a job again; only a user's retry (of dlq or cancelled) does.
FINAL: tuple[Status, ...] = (Status.COMPLETED, Status.FAILED, Status.DLQ, Status.CANCELLED)
#: Statuses a job can be cancelled from at once (no executor runs it yet, a template, or a
#: workflow step waiting for its parents).
CANCELLABLE: tuple[Status, ...] = (
    Status.WAITING,
    Status.PENDING,
    Status.QUEUED,
    Status.CLAIMED,
    Status.PAUSED,
)
#: Statuses a job can be retried (replayed) from.
RETRYABLE: tuple[Status, ...] = (Status.DLQ, Status.CANCELLED)
