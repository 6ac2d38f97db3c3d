"""Schedules declared in code: declarations checked with the API's rules, and the sync plan
(create what is new, update what changed, retire what is gone, never touch a template made
by hand)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobscheduler.domain.model import job_to_json
from jobscheduler.domain.validation import parse_create_request
from jobscheduler.errors import ValidationError
from jobscheduler.handlers import HandlerRegistry, JobContext
from jobscheduler.handlers.schedules import Action, Schedule, plan_sync
from jobscheduler.handlers.sync import app_name, resolve_tenants

from .conftest import BASE

APP = "myjobs"


def make_registry() -> HandlerRegistry:
    registry = HandlerRegistry()

    @registry.schedule("weekly", cron="0 3 * * 1", tenant_id="acme")
    @registry.handler("report", validate={"type": "object"}, max_attempts=4)
    async def report(ctx: JobContext) -> None: ...

    registry.schedule(
        "nightly",
        cron="0 2 * * *",
        timezone="Europe/Paris",
        job_type=report,
        payload={"format": "pdf"},
        tenant_id="acme",
    )
    return registry


def stored(schedule: Schedule, *, managed_by: str | None = APP, **changes: Any) -> dict[str, Any]:
    """The template as the API shows it after creating ``schedule``."""
    body = schedule.body(managed_by=managed_by)
    job = parse_create_request(
        body, now=BASE, job_types={schedule.job_type: None}, max_attempts_defaults={"report": 4}
    )
    return {**job_to_json(job), **changes}


def plan(registry: HandlerRegistry, existing: list[dict[str, Any]]) -> dict[str, Any]:
    declared = [
        (s, s.expected(None, registry.max_attempts_defaults())) for s in registry.schedules()
    ]
    return {step.name: step for step in plan_sync(declared, existing, app=APP)}


def test_declarations_keep_their_order_and_the_decorator_names_the_handlers_type() -> None:
    registry = make_registry()
    assert [(s.name, s.job_type) for s in registry.schedules()] == [
        ("weekly", "report"),
        ("nightly", "report"),
    ]
    assert registry.schedules()[1].policy == {"timezone": "Europe/Paris"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "0 2 * *"}, "schedule 'bad': cron"),
        ({"cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "schedule 'bad': timezone"),
        ({"cron": "0 2 * * *", "catch_up": "sometimes"}, "schedule 'bad': catchUp"),
        ({"cron": "0 2 * * *", "priority": 10**9}, "schedule 'bad': priority"),
        ({"cron": "0 2 * * *", "every": "day"}, "unknown option(s) every"),
        ({"cron": "0 2 * * *", "payload": {"n": 1}}, "schedule 'bad': payload: must be"),
    ],
)
def test_a_bad_declaration_is_refused_with_the_apis_message(
    options: dict[str, Any], message: str
) -> None:
    registry = HandlerRegistry()

    def strict(payload: Any) -> None:
        if payload:
            raise ValidationError("payload: must be empty")

    registry.register("strict", lambda ctx: None, run_in="thread", validate=strict)
    with pytest.raises(ValidationError, match=re.escape(message)):
        registry.schedule("bad", job_type="strict", tenant_id="acme", **options)


def test_a_name_declared_twice_in_a_tenant_is_refused() -> None:
    registry = make_registry()
    with pytest.raises(ValueError, match="already declared"):
        registry.schedule("nightly", cron="0 1 * * *", job_type="report", tenant_id="acme")
    registry.schedule("nightly", cron="0 1 * * *", job_type="report", tenant_id="other")


def test_the_schedule_decorator_needs_a_handler_below_it() -> None:
    with pytest.raises(TypeError, match=r"above @registry\.handler"):
        HandlerRegistry().schedule("x", cron="0 1 * * *")(lambda ctx: None)  # type: ignore[arg-type]


def test_new_schedules_are_created_and_a_second_plan_changes_nothing() -> None:
    registry = make_registry()
    first = plan(registry, [])
    assert {name: step.action for name, step in first.items()} == {
        "weekly": Action.CREATE,
        "nightly": Action.CREATE,
    }
    existing = [stored(s) for s in registry.schedules()]
    second = plan(registry, existing)
    assert {step.action for step in second.values()} == {Action.UNCHANGED}


def test_a_changed_schedule_is_updated_with_only_its_changed_fields() -> None:
    registry = make_registry()
    nightly = registry.schedules()[1]
    old = stored(nightly, cron="0 1 * * *", payload={"format": "csv"}, timezone="UTC")
    step = plan(registry, [old, stored(registry.schedules()[0])])["nightly"]
    assert step.action is Action.UPDATE
    assert step.patch() == {
        "cron": "0 2 * * *",
        "payload": {"format": "pdf"},
        "timezone": "Europe/Paris",
    }
    assert 'cron: "0 1 * * *" -> "0 2 * * *"' in step.describe()


def test_a_template_of_the_app_the_code_no_longer_declares_is_retired() -> None:
    registry = make_registry()
    gone = Schedule(name="gone", cron="0 5 * * *", job_type="report", tenant_id="acme")
    steps = plan(registry, [*(stored(s) for s in registry.schedules()), stored(gone)])
    assert steps["gone"].action is Action.RETIRE
    retired = stored(gone, status="cancelled")
    assert "gone" not in plan(registry, [stored(s) for s in registry.schedules()] + [retired])


def test_a_template_made_by_hand_is_a_conflict_and_never_retired_or_changed() -> None:
    registry = make_registry()
    nightly = registry.schedules()[1]
    by_hand = stored(nightly, managed_by=None, cron="*/5 * * * *")
    stray = stored(
        Schedule(name="stray", cron="0 5 * * *", job_type="report", tenant_id="acme"),
        managed_by=None,
    )
    steps = plan(registry, [by_hand, stray, stored(registry.schedules()[0])])
    assert steps["nightly"].action is Action.CONFLICT
    assert "made by hand" in steps["nightly"].reason
    assert "stray" not in steps
    other_app = stored(nightly, managed_by="billing")
    assert plan(registry, [other_app])["nightly"].action is Action.CONFLICT


def test_a_retired_template_of_the_app_declared_again_is_revived() -> None:
    registry = make_registry()
    retired = stored(registry.schedules()[1], status="cancelled")
    step = plan(registry, [retired])["nightly"]
    assert step.action is Action.REVIVE
    assert step.patch() == {}


def test_tenants_default_to_jobscheduler_tenant_and_a_schedule_without_one_is_refused() -> None:
    plain = Schedule(name="x", cron="0 1 * * *", job_type="noop")
    assert resolve_tenants([plain], "acme")[0].tenant_id == "acme"
    with pytest.raises(ValidationError, match="names no tenant"):
        resolve_tenants([plain], None)


def test_the_app_name_leaves_out_the_default_attribute() -> None:
    assert app_name("myjobs") == app_name("myjobs:registry") == "myjobs"
    assert app_name("pkg.jobs:other") == "pkg.jobs:other"
