"""Schedules declared in code, and the plan that makes the store match them.

    registry.schedule("nightly-report", cron="0 2 * * *", timezone="Europe/Paris",
                      job_type="report", payload={"format": "pdf"}, tenant_id="acme")

A :class:`Schedule` is a cron template described in code. Its ``name`` is the template's
``idempotencyKey``: its identity within its tenant. ``jobscheduler schedules sync --app
myjobs`` (:mod:`jobscheduler.handlers.sync`) reads the tenant's templates, and
:func:`plan_sync` -- pure, no I/O -- decides what to do with each: create what is new, update
what changed, retire what the code no longer declares, and leave alone every template the
app did not make. Templates made by a sync carry ``managedBy`` (the app's name); only those
are ever changed or retired. A template made by hand, or by another app, under a declared
name is a conflict.

What a template would look like is computed by the API's own rules
(:func:`jobscheduler.domain.validation.parse_create_request` and
:func:`jobscheduler.domain.model.job_to_json`), so the comparison is of like with like and
the rules have one copy.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from jobscheduler.domain.model import job_to_json
from jobscheduler.domain.validation import PayloadValidator, parse_create_request
from jobscheduler.errors import ValidationError

#: The schedule settings a declaration takes, Python name -> the API's name.
POLICY_OPTIONS: dict[str, str] = {
    "timezone": "timezone",
    "dst_gap": "dstGap",
    "dst_fold": "dstFold",
    "catch_up": "catchUp",
    "catch_up_window": "catchUpWindow",
    "jitter": "jitter",
    "overlap": "overlap",
}
#: The template fields a sync keeps equal to the code (API names).
COMPARED = (
    "jobType",
    "cron",
    "payload",
    "priority",
    "maxAttempts",
    *POLICY_OPTIONS.values(),
)
#: What a template's ``jitter`` reads as when it has none.
NO_JITTER = "0s"
#: A template that still fires (or would, once resumed).
ACTIVE = ("pending", "paused")
_PLACEHOLDER_TENANT = "tenant"


@attrs.frozen(kw_only=True)
class Schedule:
    """One cron template declared in code (see the module doc)."""

    name: str
    cron: str
    job_type: str
    tenant_id: str | None = None
    payload: Mapping[str, Any] = attrs.field(factory=dict)
    priority: int | None = None
    max_attempts: int | None = None
    #: Schedule settings by their API names (``timezone``, ``catchUp``, ...), as given.
    policy: Mapping[str, Any] = attrs.field(factory=dict)

    def body(self, managed_by: str | None = None) -> dict[str, Any]:
        """The ``POST /jobs`` body that creates the template."""
        body: dict[str, Any] = {
            "idempotencyKey": self.name,
            "tenantId": self.tenant_id,
            "jobType": self.job_type,
            "payload": dict(self.payload),
            "cron": self.cron,
            **self.policy,
        }
        if self.priority is not None:
            body["priority"] = self.priority
        if self.max_attempts is not None:
            body["maxAttempts"] = self.max_attempts
        if managed_by is not None:
            body["managedBy"] = managed_by
        return {k: v for k, v in body.items() if v is not None}

    def expected(
        self,
        validator: PayloadValidator | None = None,
        max_attempts_defaults: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """The compared fields of the template as the API would store it (ValidationError
        with the API's message if it would refuse it)."""
        body = self.body()
        body.setdefault("tenantId", _PLACEHOLDER_TENANT)
        job = parse_create_request(
            body,
            now=datetime.now(UTC),
            job_types={self.job_type: validator},
            max_attempts_defaults=max_attempts_defaults,
        )
        shown = job_to_json(job)
        return {field: _compared(shown, field) for field in COMPARED}

    @property
    def label(self) -> str:
        return f"{self.tenant_id or '(key tenant)'}/{self.name}"


def _compared(template: Mapping[str, Any], field: str) -> Any:
    value = template.get(field)
    if field == "jitter" and value is None:
        return NO_JITTER
    return value


def make_schedule(
    name: str,
    *,
    cron: str,
    job_type: str,
    tenant_id: str | None = None,
    payload: Mapping[str, Any] | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    validator: PayloadValidator | None = None,
    **policy: Any,
) -> Schedule:
    """A checked declaration: ValidationError naming the schedule and the field (the API's
    message) for anything ``POST /jobs`` would refuse; ``validator`` checks the payload
    when the job type's handler is known."""
    unknown = sorted(set(policy) - set(POLICY_OPTIONS))
    if unknown:
        raise ValidationError(
            f"schedule {name!r}: unknown option(s) {', '.join(unknown)} "
            f"(accepted: {', '.join(POLICY_OPTIONS)})"
        )
    schedule = Schedule(
        name=name,
        cron=cron,
        job_type=job_type,
        tenant_id=tenant_id,
        payload=dict(payload or {}),
        priority=priority,
        max_attempts=max_attempts,
        policy={POLICY_OPTIONS[k]: v for k, v in policy.items() if v is not None},
    )
    try:
        schedule.expected(validator)
    except ValidationError as exc:
        raise ValidationError(f"schedule {name!r}: {exc}") from None
    return schedule


# ------------------------------------------------------------------------------ the plan


class Action(enum.StrEnum):
    """What a sync does with one template."""

    #: Declared in code, no template holds its name: create it.
    CREATE = "create"
    #: Ours, and the code changed: ``PATCH`` the changed fields.
    UPDATE = "update"
    #: Ours, retired (or dead-lettered) earlier, declared again: retry it, then patch it.
    REVIVE = "revive"
    #: Ours, active, no longer declared: retire it (``DELETE``).
    RETIRE = "retire"
    #: A template the app did not make holds a declared name: left alone.
    CONFLICT = "conflict"
    #: Ours and as declared.
    UNCHANGED = "unchanged"


@attrs.frozen(kw_only=True)
class Step:
    """One line of the plan: the action, the schedule and/or template it concerns, and for
    an update the changed fields as (stored, declared)."""

    action: Action
    tenant: str | None
    name: str
    schedule: Schedule | None = None
    template: Mapping[str, Any] | None = None
    changes: Mapping[str, tuple[Any, Any]] = attrs.field(factory=dict)
    reason: str = ""

    @property
    def changes_something(self) -> bool:
        return self.action not in (Action.UNCHANGED, Action.CONFLICT)

    def patch(self) -> dict[str, Any]:
        """The ``PATCH /jobs/{id}`` body of an update or revive."""
        return {field: new for field, (_, new) in self.changes.items()}

    def describe(self) -> str:
        """The line ``schedules sync`` prints for this step."""
        where = f"{self.tenant or '(key tenant)'}/{self.name}"
        mark = {
            Action.CREATE: "+",
            Action.UPDATE: "~",
            Action.REVIVE: "+",
            Action.RETIRE: "-",
            Action.CONFLICT: "!",
            Action.UNCHANGED: "=",
        }[self.action]
        line = f"{mark} {self.action.value:<9} {where}"
        if self.action is Action.CREATE and self.schedule is not None:
            s = self.schedule
            zone = s.policy.get("timezone", "UTC")
            line += f"  {s.job_type} {s.cron!r} {zone}"
        if self.changes:
            line += "  " + ", ".join(
                f"{field}: {_show(old)} -> {_show(new)}"
                for field, (old, new) in self.changes.items()
            )
        if self.reason:
            line += f"  ({self.reason})"
        return line


def _show(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def plan_sync(
    declared: Sequence[tuple[Schedule, Mapping[str, Any]]],
    existing: Iterable[Mapping[str, Any]],
    *,
    app: str,
) -> list[Step]:
    """What to do so the store matches the code: one step per declared schedule and per
    template of ``app`` the code no longer declares.

    ``declared`` pairs each schedule with its :meth:`Schedule.expected` fields;
    ``existing`` is every template (as the API shows them) of the tenants concerned. A
    template is the app's when its ``managedBy`` is ``app``.
    """
    by_key: dict[tuple[str | None, str], Mapping[str, Any]] = {}
    for template in existing:
        by_key[(template.get("tenantId"), str(template.get("idempotencyKey")))] = template
    steps: list[Step] = []
    wanted: set[tuple[str | None, str]] = set()
    for schedule, expected in declared:
        key = (schedule.tenant_id, schedule.name)
        wanted.add(key)
        steps.append(_step(schedule, expected, by_key.get(key), app))
    for key, template in sorted(by_key.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        if key in wanted or template.get("managedBy") != app:
            continue
        if template.get("status") in ACTIVE:
            steps.append(Step(action=Action.RETIRE, tenant=key[0], name=key[1], template=template))
    return steps


def _step(
    schedule: Schedule,
    expected: Mapping[str, Any],
    template: Mapping[str, Any] | None,
    app: str,
) -> Step:
    tenant, name = schedule.tenant_id, schedule.name
    if template is None:
        return Step(action=Action.CREATE, tenant=tenant, name=name, schedule=schedule)
    # Every step from here on is about this schedule and the template that holds its name.
    step = functools.partial(Step, tenant=tenant, name=name, schedule=schedule, template=template)
    owner = template.get("managedBy")
    if owner != app:
        if not template.get("cron"):
            reason = "a one-off job holds this key"
        elif owner:
            reason = f"a template managed by {owner!r} holds this key"
        else:
            reason = "a template made by hand holds this key; left alone"
        return step(action=Action.CONFLICT, reason=reason)
    changes = {
        field: (_compared(template, field), value)
        for field, value in expected.items()
        if _compared(template, field) != value
    }
    if "jobType" in changes:
        return step(
            action=Action.CONFLICT,
            reason=(
                f"its job type changed ({changes['jobType'][0]} -> {changes['jobType'][1]}), "
                "which a template cannot: give the schedule a new name"
            ),
        )
    if template.get("status") not in ACTIVE:
        return step(action=Action.REVIVE, changes=changes, reason=f"was {template.get('status')}")
    return step(action=Action.UPDATE if changes else Action.UNCHANGED, changes=changes)


__all__ = ["Action", "Schedule", "Step", "make_schedule", "plan_sync"]
