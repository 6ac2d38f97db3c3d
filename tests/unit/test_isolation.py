"""The isolation suite: every route of the app, enumerated from ``app.url_map`` (so a route
added later is covered without editing this file), called by tenant A against tenant B's
objects, with no key, with a revoked key, and with a reader key on writes.

For every (route, method, case) it proves: no read (nothing of B's in the reply), no change
(B's jobs, keys, audit records and webhooks are exactly as before), no existence leak (the reply is
a refusal, or a 2xx that names nothing of B's). Every route must also declare the role it
needs in the route table (an operation's ``role``, a page's): an undeclared route fails
here.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from jobscheduler.api.route_table import PUBLIC, table_of
from jobscheduler.api.session import csrf_token
from jobscheduler.domain.audit import AuditQuery
from jobscheduler.domain.flow import LimitOverride, Limits, TenantWeight
from jobscheduler.domain.keys import Role
from jobscheduler.domain.model import job_to_json, new_job_id
from jobscheduler.store.workflows import WorkflowQuery

from .conftest import DepsFactory
from .tenancy_support import AuthApi, auth_deps, serve_auth

READ_METHODS = {"GET", "HEAD", "OPTIONS"}
B = "tenant-b"

#: Bodies for known write routes (a route not listed gets a generic body naming tenant B).
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/jobs"): {
        "idempotencyKey": "b-template",  # B's own key: a clash must not leak
        "tenantId": B,
        "jobType": "noop",
        "scheduledAt": "2026-01-01T00:00:00Z",
    },
    ("POST", "/keys"): {"tenantId": B, "role": "admin"},
    ("POST", "/webhooks"): {"tenantId": B, "url": "https://b.example/hook", "events": ["job.dlq"]},
    ("POST", "/jobs/batch"): {
        "jobs": [
            {
                "idempotencyKey": "b-template",
                "tenantId": B,
                "jobType": "noop",
                "scheduledAt": "2026-01-01T00:00:00Z",
            }
        ]
    },
    ("POST", "/cron/preview"): {"cron": "*/5 * * * *"},
    # Management: bulk filters naming B; single-job actions with valid bodies,
    # so the refusal comes from the job's tenant, not from validation.
    ("POST", "/jobs/cancel"): {"filter": {"tenantId": B}},
    ("POST", "/jobs/retry"): {"filter": {"tenantId": B}},
    ("POST", "/jobs/<job_id>/cancel"): {},
    ("POST", "/jobs/<job_id>/retry"): {},
    ("POST", "/jobs/<job_id>/pause"): {},
    ("POST", "/jobs/<job_id>/resume"): {},
    ("POST", "/jobs/<job_id>/trigger"): {},
    ("PATCH", "/jobs/<job_id>"): {"priority": 3},
    ("POST", "/workflows"): {
        "idempotencyKey": "b-workflow",  # B's own key: a clash must not leak
        "tenantId": B,
        "steps": [{"name": "only", "jobType": "noop"}],
    },
    ("POST", "/workflows/<workflow_id>/cancel"): {},
    ("POST", "/workflows/<workflow_id>/retry"): {},
    # Flow control: B's limits and B's weight.
    ("PUT", "/flow/limits/<job_type>"): {"concurrency": 1},
    ("PUT", "/flow/weights/<tenant_id>"): {"weight": 9},
}

#: A job type only tenant B's override names: a reply holding it leaks B's limits.
B_SECRET_TYPE = "b-secret-type"


@attrs.frozen
class Route:
    method: str
    rule: str
    endpoint: str

    @property
    def writes(self) -> bool:
        return self.method not in READ_METHODS

    @property
    def template_action(self) -> bool:
        """A route that acts on a cron template (so it is called with B's template)."""
        return self.rule.endswith(("/pause", "/resume", "/trigger")) or (
            self.method in ("PATCH", "DELETE") and self.rule == "/jobs/<job_id>"
        )

    def __str__(self) -> str:
        return f"{self.method} {self.rule}"


def enumerate_routes(app: Any) -> list[Route]:
    routes = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        for method in sorted(rule.methods or ()):
            if method in ("HEAD", "OPTIONS"):
                continue
            routes.append(Route(method, rule.rule, rule.endpoint))
    return sorted(routes, key=str)


@attrs.frozen
class World:
    api: AuthApi
    b_job: dict[str, Any]
    b_template: dict[str, Any]
    b_key_id: str
    b_workflow: dict[str, Any]
    b_webhook: dict[str, Any]

    def path(self, route: Route, *, missing: bool = False) -> tuple[str, list[str]]:
        """The route's path naming B's objects (or, ``missing``, ids nobody has), with the
        ids it used."""
        used: list[str] = []

        def value(match: re.Match[str]) -> str:
            name = match.group(1).split(":")[-1]
            if name == "key_id":
                chosen = secrets.token_hex(8) if missing else self.b_key_id
            elif name == "tenant_id":
                chosen = "tenant-nobody" if missing else B
            elif name == "job_type":
                chosen = "noop"
            elif name == "webhook_id":
                chosen = new_job_id() if missing else str(self.b_webhook["id"])
            elif missing:
                chosen = new_job_id()
            elif name == "workflow_id":
                chosen = str(self.b_workflow["id"])
            elif route.rule.endswith(("/next", "/occurrences")) or route.template_action:
                chosen = str(self.b_template["id"])
            else:
                chosen = str(self.b_job["id"])
            used.append(chosen)
            return chosen

        path = re.sub(r"<([^>]+)>", value, route.rule)
        return f"{path}?tenantId={B}", used

    def secrets_of_b(self) -> list[str]:
        """Strings that only B's objects contain: a reply holding one leaks them."""
        return [
            self.b_job["id"],
            self.b_template["id"],
            self.b_key_id,
            "b-template",
            self.b_workflow["id"],
            self.b_workflow["steps"][0]["jobId"],
            "b-workflow",
            B_SECRET_TYPE,
            self.b_webhook["id"],
            self.b_webhook["url"],
        ]


def echo_removed(text: str, ids: list[str]) -> str:
    for value in ids:
        text = text.replace(value, "<id>")
    return text


async def snapshot(api: AuthApi) -> tuple[Any, ...]:
    store = api.deps.store
    jobs = [job_to_json(j) for j in await store.list_jobs(B, None, 1000)]
    keys = [attrs.asdict(k) for k in await store.list_keys(B)]
    audit = [attrs.asdict(r) for r in await store.list_audit(AuditQuery(tenant=B))]
    workflows = [
        attrs.asdict(w) for w in await store.find_workflows(WorkflowQuery(tenant_id=B), 100)
    ]
    limits = [attrs.asdict(o) for o in await store.limit_overrides(B)]
    weights = [w for w in await store.tenant_weights() if w.tenant_id == B]
    webhooks = [attrs.asdict(w) for w in await store.list_webhooks(B)]
    return (
        json.dumps(jobs, sort_keys=True, default=str),
        keys,
        audit,
        workflows,
        limits,
        weights,
        webhooks,
    )


@pytest.fixture
async def world(make_deps: DepsFactory) -> AsyncIterator[World]:
    async with serve_auth(auth_deps(make_deps)) as api:
        job = await api.call("POST", "/jobs", as_="b-writer", json=BODIES[("POST", "/jobs")])
        template = await api.call(
            "POST",
            "/jobs",
            as_="b-writer",
            json={"idempotencyKey": "b-cron", "jobType": "noop", "cron": "*/5 * * * *"},
        )
        workflow = await api.call(
            "POST", "/workflows", as_="b-writer", json=BODIES[("POST", "/workflows")]
        )
        assert job.status == template.status == workflow.status == 201
        store = api.deps.store
        secret = Limits.of(concurrency=7)
        for job_type in ("noop", B_SECRET_TYPE):
            await store.put_limit_override(
                LimitOverride(tenant_id=B, job_type=job_type, limits=secret)
            )
        await store.put_tenant_weight(TenantWeight(tenant_id=B, weight=5))
        await api.add_key("a-revoked", "tenant-a", Role.ADMIN)
        revoked = await api.call("DELETE", f"/keys/{api.key_ids['a-revoked']}", as_="admin")
        assert revoked.status == 200
        webhook = await api.call(
            "POST",
            "/webhooks",
            as_="b-admin",
            json={"url": "https://b-only.example/hook", "events": ["job.dlq"]},
        )
        assert webhook.status == 201
        yield World(
            api, job.json, template.json, api.key_ids["b-writer"], workflow.json, webhook.json
        )


#: The callers of every case (None: no key at all).
CASES = {
    "no key": None,
    "revoked key": "a-revoked",
    "tenant A reader": "a-reader",
    "tenant A writer": "a-writer",
    "tenant A admin": "a-admin",
}


#: The dashboard's public pages and what they answer to any caller in this suite: the
#: static route is asked for a file named like B's job id (none), the sign-in form posted
#: a JSON body (no key in it), sign-out and ``/`` redirect.
PUBLIC_PAGES = {
    "ui.static": 404,
    "ui.signin_form": 200,
    "ui.signin": 400,
    "ui.signout": 303,
    "root": 302,
}


def is_page(route: Route) -> bool:
    """A dashboard page (HTML for a browser; ``/`` redirects to them)."""
    return route.endpoint.startswith("ui.") or route.endpoint == "root"


def expected(route: Route, case: str, role: Role | str | None) -> set[int]:
    """The statuses allowed for this route and case."""
    if role == PUBLIC:
        return {PUBLIC_PAGES.get(route.endpoint, 200)}
    if case in ("no key", "revoked key"):
        # A page sends a caller without a valid key to the sign-in form instead.
        return {303} if is_page(route) else {401}
    caller = Role(CASES[case].split("-", 1)[1])  # type: ignore[union-attr]
    needed = role if isinstance(role, Role) else Role.ADMIN
    if caller.rank < needed.rank:
        return {403}
    # Allowed to call the route: B's objects must look absent or be refused; a stateless
    # route may answer 2xx as long as it names nothing of B's (checked separately).
    return {200, 400, 403, 404}


async def test_every_route_declares_the_role_it_needs(world: World) -> None:
    app = world.api.app
    undeclared = [
        str(route)
        for route in enumerate_routes(app)
        if table_of(app).access(route.endpoint) is None
    ]
    assert undeclared == []


async def test_no_route_lets_tenant_a_read_change_or_detect_tenant_bs_objects(
    world: World,
) -> None:
    api = world.api
    routes = enumerate_routes(api.app)
    assert len(routes) >= 8  # the enumeration itself works
    before = await snapshot(api)
    table: list[tuple[str, str, int]] = []
    failures: list[str] = []
    for route in routes:
        role = table_of(api.app).access(route.endpoint)
        for case, caller in CASES.items():
            kwargs: dict[str, Any] = {}
            if route.writes:
                kwargs["json"] = BODIES.get((route.method, route.rule), {"tenantId": B})
            path, used = world.path(route)
            reply = await api.call(route.method, path, as_=caller, **kwargs)
            table.append((str(route), case, reply.status))
            allowed = expected(route, case, role)
            if reply.status not in allowed:
                failures.append(f"{route} as {case}: {reply.status} not in {sorted(allowed)}")
            # No read: the reply names nothing of B's beyond the ids the caller sent.
            text = echo_removed(reply.text, used)
            leaked = [s for s in world.secrets_of_b() if s in text]
            if leaked and role != PUBLIC:
                failures.append(f"{route} as {case}: reply names B's {leaked}: {reply.text}")
            # No existence leak: the same call naming ids nobody has gets the same reply.
            if used:
                twin_path, twin_used = world.path(route, missing=True)
                twin = await api.call(route.method, twin_path, as_=caller, **kwargs)
                if (twin.status, echo_removed(twin.text, twin_used)) != (reply.status, text):
                    failures.append(
                        f"{route} as {case}: B's object answers {reply.status} {reply.text}, "
                        f"a missing one {twin.status} {twin.text}"
                    )
            if reply.status >= 500:
                failures.append(f"{route} as {case}: {reply.status}")
    assert failures == [], "\n".join(failures)
    assert await snapshot(api) == before
    # The size of the suite, for the report: every route times every case.
    assert len(table) == len(routes) * len(CASES)
    print(f"isolation suite: {len(routes)} routes x {len(CASES)} cases = {len(table)} calls")


async def test_a_reader_key_is_refused_on_every_write_route(world: World) -> None:
    api = world.api
    for route in enumerate_routes(api.app):
        role = table_of(api.app).access(route.endpoint)
        if not route.writes or role == PUBLIC:
            continue
        # On its own tenant: the role, not the tenant, is what refuses it.
        body = dict(BODIES.get((route.method, route.rule), {}))
        if "tenantId" in body:
            body["tenantId"] = "tenant-a"
        path = re.sub(r"<[^>]+>", "0" * 24, route.rule)
        reply = await api.call(route.method, path, as_="a-reader", json=body)
        if role == Role.READER:
            assert reply.status != 403, f"{route} is declared readable"
        else:
            assert reply.status == 403, f"{route}: {reply.status} {reply.text}"


async def test_tenant_bs_cron_ledger_answers_like_a_missing_template(world: World) -> None:
    api = world.api
    mine = await api.call("GET", f"/jobs/{world.b_template['id']}/occurrences", as_="b-reader")
    assert mine.status == 200  # B reads its own ledger: the route works for its tenant
    for caller in ("a-reader", "a-writer", "a-admin"):
        theirs = await api.call("GET", f"/jobs/{world.b_template['id']}/occurrences", as_=caller)
        missing_id = new_job_id()
        missing = await api.call("GET", f"/jobs/{missing_id}/occurrences", as_=caller)
        assert theirs.status == missing.status == 404
        assert echo_removed(theirs.text, [world.b_template["id"]]) == echo_removed(
            missing.text, [missing_id]
        )


def session(token: str) -> dict[str, str]:
    """The headers of a browser signed in to the dashboard with ``token`` (its cookie)."""
    return {"Cookie": f"jobscheduler_session={token}"}


async def test_a_dashboard_session_sees_tenant_bs_job_as_missing(world: World) -> None:
    """The page of B's job, and the JSON read its script makes with the cookie, answer
    tenant A's session exactly as for an id nobody has."""
    api = world.api
    cookie = session(api.tokens["a-reader"])
    b_id, missing_id = str(world.b_job["id"]), new_job_id()
    for path in ("/ui/jobs/{}", "/jobs/{}", "/jobs/{}/attempts"):
        theirs = await api.call("GET", path.format(b_id), headers=cookie)
        missing = await api.call("GET", path.format(missing_id), headers=cookie)
        assert theirs.status == missing.status
        assert echo_removed(theirs.text, [b_id]) == echo_removed(missing.text, [missing_id])
        assert not any(s in echo_removed(theirs.text, [b_id]) for s in world.secrets_of_b())
    # The JSON read is the refusal itself (the page is only a shell the script fills).
    assert (await api.call("GET", f"/jobs/{b_id}", headers=cookie)).status == 404
    # And B's own session does see it (the cookie is a real credential).
    own = await api.call("GET", f"/jobs/{b_id}", headers=session(api.tokens["b-reader"]))
    assert own.status == 200


async def test_a_session_write_needs_the_csrf_header(world: World) -> None:
    api = world.api
    before = await snapshot(api)
    cookie = session(api.tokens["b-writer"])
    body = {"idempotencyKey": "b-forged", "jobType": "noop", "scheduledAt": "2026-01-01T00:00:00Z"}
    forged = await api.call("POST", "/jobs", headers=cookie, json=body)
    assert forged.status == 403
    wrong = await api.call("POST", "/jobs", headers={**cookie, "X-CSRF-Token": "0" * 64}, json=body)
    assert wrong.status == 403
    assert await snapshot(api) == before
    # With the page's token the same write is the key's own: it goes through.
    signed = {**cookie, "X-CSRF-Token": csrf_token(api.tokens["b-writer"])}
    assert (await api.call("POST", "/jobs", headers=signed, json=body)).status == 201
