"""``schedules sync``: make the store's templates match the schedules an app declares, through
the HTTP API (the same routes as ``jobscheduler jobs create`` and ``cron update|delete``).

:func:`sync_schedules` reads every template of the tenants the app declares schedules in
(plus ``tenants``), plans with :func:`~jobscheduler.handlers.schedules.plan_sync`, and --
unless ``dry_run`` -- applies each step: a create (``create_or_get``, marked ``managedBy``),
a ``PATCH`` of the changed fields, a retry then ``PATCH`` of a template of the app retired
earlier, a ``DELETE`` of one the code no longer declares. A step that fails is reported and
the others go on. Run twice, the second run changes nothing.

The templates of the app are the ones whose ``managedBy`` is its name (:func:`app_name`);
a template made by hand under a declared name is a conflict, reported and left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from jobscheduler.errors import JobSchedulerError, ValidationError

from .schedules import Action, Schedule, Step, plan_sync

if TYPE_CHECKING:
    from jobscheduler.client import AsyncClient

    from .registry import HandlerRegistry


def app_name(spec: str) -> str:
    """The ``managedBy`` of an app's templates: its ``--app`` module, with the attribute
    only when it is not the default ``registry`` (``myjobs`` and ``myjobs:registry`` are
    one app)."""
    module, _, attribute = spec.partition(":")
    return module if attribute in ("", "registry") else spec


@attrs.frozen(kw_only=True)
class Outcome:
    """One step and how it went: ``error`` says why it failed (None: done, or a dry run)."""

    step: Step
    error: str | None = None

    def line(self, *, dry_run: bool) -> str:
        text = self.step.describe()
        if self.error is not None:
            return f"{text}  FAILED: {self.error}"
        if dry_run and self.step.changes_something:
            return f"{text}  (dry run)"
        return text


@attrs.frozen(kw_only=True)
class Report:
    """What a sync did (or, with ``dry_run``, would do)."""

    app: str
    outcomes: list[Outcome]
    dry_run: bool

    @property
    def changes(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.step.changes_something]

    @property
    def problems(self) -> list[Outcome]:
        """Conflicts and failed steps: each needs a person."""
        return [o for o in self.outcomes if o.error is not None or o.step.action is Action.CONFLICT]

    def lines(self) -> list[str]:
        """The diff as ``schedules sync`` prints it: one line per create, update, revive,
        retire, conflict or failure, then a summary."""
        shown = [
            o.line(dry_run=self.dry_run)
            for o in self.outcomes
            if o.step.action is not Action.UNCHANGED
        ]
        unchanged = sum(1 for o in self.outcomes if o.step.action is Action.UNCHANGED)
        verb = "would change" if self.dry_run else "changed"
        if not self.changes:
            summary = f"no change: {unchanged} schedule(s) of {self.app} up to date"
        else:
            summary = f"{verb} {len(self.changes)} template(s); {unchanged} up to date"
        if self.problems:
            summary += f"; {len(self.problems)} problem(s)"
        return [*shown, summary]


def resolve_tenants(schedules: Sequence[Schedule], default_tenant: str | None) -> list[Schedule]:
    """Each schedule with its tenant: its own, else ``default_tenant``
    (``JOBSCHEDULER_TENANT``); ValidationError for one left with none."""
    out = []
    for schedule in schedules:
        if schedule.tenant_id is None:
            if default_tenant is None:
                raise ValidationError(
                    f"schedule {schedule.name!r} names no tenant: pass tenant_id= to "
                    "registry.schedule or set JOBSCHEDULER_TENANT"
                )
            schedule = attrs.evolve(schedule, tenant_id=default_tenant)
        out.append(schedule)
    return out


async def sync_schedules(
    client: AsyncClient,
    registry: HandlerRegistry,
    *,
    app: str,
    dry_run: bool = False,
    tenants: Sequence[str] = (),
    default_tenant: str | None = None,
) -> Report:
    """Make the templates of the tenants concerned match ``registry``'s schedules (see the
    module doc). ``registry`` is the loaded app (its handlers' validators check payloads);
    ``app`` the ``managedBy`` name. ValidationError before any request for a schedule the
    API would refuse; the client's errors for a read that fails."""
    schedules = resolve_tenants(registry.schedules(), default_tenant)
    defaults = registry.max_attempts_defaults()
    declared: list[tuple[Schedule, dict[str, Any]]] = []
    for schedule in schedules:
        handler = registry.get(schedule.job_type) if schedule.job_type in registry else None
        if handler is None:
            raise ValidationError(
                f"schedule {schedule.name!r}: jobType: unknown job type {schedule.job_type!r} "
                f"(known: {', '.join(registry.names())})"
            )
        try:
            declared.append((schedule, schedule.expected(handler.validate, defaults)))
        except ValidationError as exc:
            raise ValidationError(f"schedule {schedule.name!r}: {exc}") from None
    wanted_tenants = sorted({str(s.tenant_id) for s in schedules} | set(tenants))
    existing: list[dict[str, Any]] = []
    for tenant in wanted_tenants:
        existing.extend([dict(t) async for t in client.list(tenant, cron=True)])
    steps = plan_sync(declared, existing, app=app)
    outcomes = []
    for step in steps:
        error = None if dry_run else await _apply(client, step, app)
        outcomes.append(Outcome(step=step, error=error))
    return Report(app=app, outcomes=outcomes, dry_run=dry_run)


def _keywords(fields: dict[str, Any]) -> dict[str, Any]:
    """API field names -> the client's keywords (schedule settings keep their API names)."""
    names = {"maxAttempts": "max_attempts"}
    return {names.get(field, field): value for field, value in fields.items()}


async def _apply(client: AsyncClient, step: Step, app: str) -> str | None:
    """Carry out one step; the error's message if it failed."""
    try:
        if step.action is Action.CREATE:
            assert step.schedule is not None
            body = step.schedule.body(managed_by=app)
            job, created = await client.create_or_get(
                body.pop("jobType"),
                tenant_id=body.pop("tenantId"),
                idempotency_key=body.pop("idempotencyKey"),
                **_keywords(body),
            )
            if not created and job.get("managedBy") != app:
                return "a template made meanwhile by someone else holds this key; left alone"
        elif step.action in (Action.UPDATE, Action.REVIVE):
            assert step.template is not None
            job_id = str(step.template["id"])
            if step.action is Action.REVIVE:
                await client.retry(job_id)
            patch = step.patch()
            patch.pop("jobType", None)
            if patch:
                await client.update(job_id, **_keywords(patch))
        elif step.action is Action.RETIRE:
            assert step.template is not None
            await client.delete(str(step.template["id"]))
    except JobSchedulerError as exc:
        return str(exc) or type(exc).__name__
    return None


__all__ = ["Report", "app_name", "sync_schedules"]
