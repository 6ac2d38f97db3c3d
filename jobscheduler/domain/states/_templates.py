"""The scheduler's moves of a cron template as it fires: advancing it to its next fire time
(holding one buffered fire time or not), dead-lettering it, and the one-off job each fire
spawns, with its key."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jobscheduler.domain.model import Job, Status, new_job_id, truncate_error, utc

from ._lifecycle import _EPOCH, Change, _events


def _template_version(template: Job) -> dict[str, Any]:
    """What the scheduler's moves of a template are conditioned on: the version it read.

    Its fire time, so two schedulers overlapping during a leader change move it once; its
    expression and ``updated_at``, so a user's edit made after the read (which may keep
    the fire time) is never overwritten with a fire time computed from the old expression.
    """
    return {
        "status": Status.PENDING,
        "scheduled_at": template.scheduled_at,
        "cron": template.cron,
        "updated_at": template.updated_at,
    }


def advance_template(template: Job, *, next_at: datetime, now: datetime) -> Change:
    """A cron template stays pending and moves to its next fire time. Conditioned on the
    version the scheduler read (:func:`_template_version`)."""
    now = utc(now)
    return Change(
        transition="advance_template",
        job_id=template.id,
        expect=_template_version(template),
        set={"scheduled_at": utc(next_at), "updated_at": now},
    )


def dead_letter_template(template: Job, *, error: str, now: datetime) -> Change:
    """pending -> dlq for a template the scheduler cannot fire (an expression that no
    longer parses, a template it fails on), with the reason in ``lastError``."""
    now = utc(now)
    changes = {"status": Status.DLQ, "last_error": truncate_error(error), "updated_at": now}
    return Change(
        transition="dead_letter_template",
        job_id=template.id,
        expect=_template_version(template),
        set=changes,
        events=_events(template, changes, now),
    )


def instance_key(template: Job, fire_at: datetime) -> str:
    """``<template-key>-run-<unixnano of the fire time>``: the same fire time always yields
    the same key, so a repeated spawn hits the unique index and is a no-op."""
    nanos = (utc(fire_at) - _EPOCH) // timedelta(microseconds=1) * 1000
    return f"{template.idempotency_key}-run-{nanos}"


def spawn_instance(
    template: Job, *, fire_at: datetime, now: datetime, run_at: datetime | None = None
) -> Job:
    """The one-off job a cron template fires at ``fire_at``, due at ``run_at`` (the fire
    time plus the template's jitter; default the fire time). The key names ``fire_at``."""
    now = utc(now)
    return Job(
        id=new_job_id(),
        idempotency_key=instance_key(template, fire_at),
        tenant_id=template.tenant_id,
        job_type=template.job_type,
        payload=dict(template.payload),
        priority=template.priority,
        status=Status.PENDING,
        scheduled_at=utc(fire_at if run_at is None else run_at),
        max_attempts=template.max_attempts,
        created_at=now,
        updated_at=now,
        template_id=template.id,
        fire_at=utc(fire_at),
        fairness_key=template.fairness_key,
        concurrency_key=template.concurrency_key,
    )


def advance_template_holding(
    template: Job, *, next_at: datetime, buffered: datetime, now: datetime
) -> Change:
    """:func:`advance_template` that also holds the fire time ``buffered`` for
    ``overlap="buffer_one"`` (spawned by :func:`release_buffered`'s caller once the
    template's previous run has finished). Conditioned also on holding none."""
    now = utc(now)
    return Change(
        transition="advance_template",
        job_id=template.id,
        expect={**_template_version(template), "cron_buffered": None},
        set={"scheduled_at": utc(next_at), "cron_buffered": utc(buffered), "updated_at": now},
    )


def release_buffered(template: Job, *, now: datetime) -> Change:
    """A template's buffered fire time was spawned: it holds none any more. Conditioned on
    the buffer it held, so two schedulers release it once."""
    now = utc(now)
    return Change(
        transition="release_buffered",
        job_id=template.id,
        expect={"status": Status.PENDING, "cron_buffered": template.cron_buffered},
        set={"cron_buffered": None, "updated_at": now},
    )
