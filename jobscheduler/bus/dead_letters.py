"""Announcing dead-lettered jobs on ``jobs.dlq``: bounded, and never raising.

The store already says ``dlq`` when a dead letter is published; the message is only an
announcement for outside readers. So a publish that fails or takes longer than its bound is
logged (aggregated, see ``_logthrottle``) and dropped, and it never holds up whoever
settled the job.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from jobscheduler.errors import BusError
from jobscheduler.observability.logthrottle import LogThrottle

from .base import Bus, DeadLetter

if TYPE_CHECKING:
    from jobscheduler.domain.model import Job

log = logging.getLogger(__name__)
_throttled = LogThrottle(log)

#: Bound on one dead letter's publish (Kafka's own bound is ``message_timeout`` + grace).
DEAD_LETTER_TIMEOUT = 5.0


def dead_letter_of(job: Job) -> DeadLetter:
    return DeadLetter(
        job_id=job.id,
        job_type=job.job_type,
        tenant_id=job.tenant_id,
        attempts=job.attempts,
        last_error=job.last_error,
    )


async def publish_dead_letter(bus: Bus, job: Job, *, within: float = DEAD_LETTER_TIMEOUT) -> bool:
    """Publish ``job``'s dead letter within ``within`` seconds; returns whether it was published.
    A failure or timeout is logged, not raised."""
    error = "timed out"
    with trio.move_on_after(within):
        try:
            await bus.publish_dead_letter(dead_letter_of(job))
        except BusError as exc:
            error = str(exc)
        else:
            return True
    _throttled.log(
        logging.ERROR,
        "dead letter not published",
        key="dead letter not published",
        extra={"job_id": job.id, "tenant": job.tenant_id, "error": error},
    )
    return False
