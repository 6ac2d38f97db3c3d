"""The cron templates' part of a scheduler pass: fire each due template once, and
dead-letter one that fails or will not move, so that one template cannot stop or spin the
dispatch loop. How one template fires is :mod:`.cron_firing`'s.
"""

from __future__ import annotations

import enum
import logging
from datetime import datetime
from typing import Final, Literal

from jobscheduler.domain import states
from jobscheduler.domain.model import Job
from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps

from .cron_firing import TemplateFiring

# The dispatch loop's logger: these lines were the loop's, and keep their logger name.
log = logging.getLogger("jobscheduler.roles.scheduler.loop")

#: Due templates read per round trip.
TEMPLATE_BATCH = 100
#: Passes in a row a due template may fail to move before it is dead-lettered as stuck.
STUCK_LIMIT = 20


class _Unread(enum.Enum):
    UNREAD = enum.auto()


#: A pass's next due time when the pass has not read it (None is "no job pending").
UNREAD: Final = _Unread.UNREAD
NextDue = datetime | None | Literal[_Unread.UNREAD]


class TemplatePass:
    """Fires the due templates of the leader's passes (see the module doc)."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._firing = TemplateFiring(deps)
        #: Due templates that did not move, and in how many passes in a row.
        self._stuck: dict[str, int] = {}

    async def fire_due(self) -> tuple[int, NextDue]:
        """A pass's templates, after one read of what it needs
        (:meth:`~jobscheduler.store.base.JobStore.pass_reads`): release buffered fire times
        and fire due templates only if there are any. Returns how many moved, and the next
        due time as that read saw it, or :data:`UNREAD` once something moved (the pass's
        sleep then reads it again)."""
        deps = self._deps
        reads = await deps.store.pass_reads(deps.clock.now())
        fired = 0
        if reads.buffers_held or reads.templates_due:
            fired = await self.fire_all(release=reads.buffers_held)
        return fired, (UNREAD if fired else reads.next_due_at)

    async def fire_all(self, *, release: bool = True) -> int:
        """Fire every due template once; returns how many moved (spawned buffered runs
        count too). A template that did not move is not fired again in this pass."""
        deps = self._deps
        fired = await self._firing.release_buffers() if release else 0
        tried: set[str] = set()
        while True:
            now = deps.clock.now()
            due = await deps.store.due_templates(now, TEMPLATE_BATCH)
            moved = 0
            for template in due:
                if template.id not in tried:
                    tried.add(template.id)
                    moved += await self._fire(template)
            fired += moved
            if len(due) < TEMPLATE_BATCH or not moved:
                return fired

    async def _fire(self, template: Job) -> bool:
        """Spawn the instances of the template's due fire times, then move the template.

        Which fire times run is the template's catch-up policy (:func:`cron.plan_pass`) and
        overlap policy; every fire time is recorded in the template's ledger first, and
        the scheduler acts on the recorded decision
        (:mod:`jobscheduler.roles.scheduler.cron_firing`). Each
        instance is keyed on its fire time and due at the fire time plus the template's
        jitter; the move is conditional on the version read. Returns whether it moved.

        A template the scheduler fails on (an unexpected error: a bug, unexpected data) or
        that is still due after STUCK_LIMIT passes in a row is dead-lettered with the
        reason, so that one template cannot stop or spin the dispatch loop.
        """
        try:
            moved = await self._firing.fire(template)
        except StoreError:
            raise
        except Exception as exc:
            log.exception(
                "cron template failed",
                extra={"job_id": template.id, "tenant": template.tenant_id, "error": repr(exc)},
            )
            return await self._dead_letter(
                template, "error", f"the scheduler failed on this template: {exc!r}"
            )
        if moved:
            self._stuck.pop(template.id, None)
            return True
        passes = self._stuck[template.id] = self._stuck.get(template.id, 0) + 1
        if passes < STUCK_LIMIT:
            return False
        return await self._dead_letter(
            template,
            "stuck",
            f"the scheduler could not move this template past its fire time "
            f"{template.scheduled_at.isoformat()} in {passes} passes",
        )

    async def _dead_letter(self, template: Job, reason: str, error: str) -> bool:
        """Dead-letter ``template`` (fenced on the version read); True if it was."""
        self._stuck.pop(template.id, None)
        deps = self._deps
        dead = await deps.store.apply(
            states.dead_letter_template(template, error=error, now=deps.clock.now())
        )
        if dead is None:
            return False
        deps.metrics.scheduler_templates_dead_lettered.labels(reason=reason).inc()
        log.error(
            "cron template dead-lettered",
            extra={"job_id": template.id, "tenant": template.tenant_id, "error": error},
        )
        return True
