"""The JobStore contract, the scheduler's moves of a template: conditioned on the version it
read (fire time, expression, last edit), so a user's edit made after that read is never
overwritten, even one that keeps the next fire time. Run against every adapter."""

from __future__ import annotations

from datetime import timedelta

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.store import JobStore

from .store_support import NOW, make_job


async def test_an_edit_keeping_the_fire_time_is_not_overwritten_by_an_advance_from_before_it(
    store: JobStore,
) -> None:
    # Every day at 02:00, due NOW; read by the scheduler before the user's edit.
    template = await store.insert(make_job(cron="0 2 * * *", scheduled_at=NOW))
    read_by_scheduler = await store.get(template.id)
    # Weekdays at 02:00: the next fire time stays NOW (a weekday), the expression changes.
    edited = await store.apply(
        states.update_template(
            read_by_scheduler,
            fields={"cron": "0 2 * * 1-5"},
            now=NOW + timedelta(milliseconds=5),
        )
    )
    assert edited is not None

    from_old_expression = NOW + timedelta(days=1)
    stale = states.advance_template(
        read_by_scheduler, next_at=from_old_expression, now=NOW + timedelta(seconds=1)
    )
    assert await store.apply(stale) is None
    kept = await store.get(template.id)
    assert kept.cron == "0 2 * * 1-5"
    assert kept.scheduled_at == NOW

    fresh = states.advance_template(kept, next_at=from_old_expression, now=NOW)
    moved = await store.apply(fresh)
    assert moved is not None
    assert moved.cron == "0 2 * * 1-5"


async def test_a_template_edited_after_the_read_is_not_dead_lettered_by_that_read(
    store: JobStore,
) -> None:
    template = await store.insert(make_job(cron="0 2 * * *", scheduled_at=NOW))
    read_by_scheduler = await store.get(template.id)
    await store.apply(
        states.update_template(
            read_by_scheduler, fields={"cron": "0 3 * * *"}, now=NOW + timedelta(seconds=1)
        )
    )
    dead = states.dead_letter_template(read_by_scheduler, error="boom", now=NOW)
    assert await store.apply(dead) is None
    assert (await store.get(template.id)).status is Status.PENDING
