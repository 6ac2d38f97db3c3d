"""The create's fast path (api/create.py): which creates it serves itself, which it hands to
Quart, and that a handed-over create is answered as Quart answers it, with no second store
write. The ``api`` fixture of ``conftest.py`` runs the contract tests (``test_api_create*.py``,
``test_api_read.py``, ``test_api_routing.py``) through both ways (``[fast]``/``[quart]``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import attrs
import pytest
import trio
from trio.testing import MockClock

from jobscheduler.api.app import tenancy_of
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.routes.create import FAILED, FastCreate
from jobscheduler.api.session import CSRF_HEADER, SESSION_COOKIE, csrf_token
from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.keys import ApiKey
from jobscheduler.domain.model import Job, new_job_id
from jobscheduler.errors import StoreError

from .conftest import DepsFactory, ProxyStore
from .tenancy_support import AuthApi, auth_deps, serve_auth


def body(tenant: str = "tenant-a", **fields: Any) -> dict[str, Any]:
    return {
        "idempotencyKey": f"k-{new_job_id()}",
        "tenantId": tenant,
        "jobType": "noop",
        "scheduledAt": "2026-01-01T00:00:00Z",
        **fields,
    }


class CountingStore(ProxyStore):
    """Counts inserts; raises ``fail`` from them when set."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.inserts = 0
        self.key_reads = 0
        self.fail: Exception | None = None
        #: Called at each insert, before it fails or goes on.
        self.during_insert: Callable[[], None] = lambda: None

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        self.inserts += 1
        self.during_insert()
        if self.fail is not None:
            raise self.fail
        return await self.inner.insert(job, audit=audit)

    async def get_key(self, key_id: str, *, tenant: str | None = None) -> ApiKey | None:
        self.key_reads += 1
        return await self.inner.get_key(key_id, tenant=tenant)


@attrs.define
class Served:
    api: AuthApi
    store: CountingStore
    #: What reached Quart of each ``POST /jobs``: None (as it came) or the error in FAILED.
    handed: list[Exception | None]

    async def warm(self, *names: str) -> None:
        """Put these keys in the key cache, as an earlier request of theirs would."""
        authenticator = tenancy_of(self.api.app).authenticator
        for name in names:
            await authenticator.authenticate([f"Bearer {self.api.tokens[name]}"])

    async def audit_written(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's audit records once there are some: a 5xx's record is written in
        the background, after the reply."""
        with trio.fail_after(5):
            while True:
                trail = await self.api.call("GET", f"/audit?tenantId={tenant}", as_="admin")
                if trail.json["records"]:
                    return list(trail.json["records"])
                await trio.sleep(0.01)


@pytest.fixture
async def served(make_deps: DepsFactory) -> AsyncIterator[Served]:
    store = CountingStore(make_deps.store)
    deps = auth_deps(make_deps)
    deps = attrs.evolve(deps, store=store)
    async with serve_auth(deps) as api:
        fast = cast(FastCreate, api.app.asgi_app)
        quart = fast.app
        handed: list[Exception | None] = []

        async def spy(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and (scope["method"], scope["path"]) == ("POST", "/jobs"):
                handed.append(scope.get(FAILED))
            await quart(scope, receive, send)

        fast.app = spy
        yield Served(api=api, store=store, handed=handed)


async def test_a_create_by_a_cached_key_is_served_without_quart(served: Served) -> None:
    await served.warm("a-writer")
    reply = await served.api.call("POST", "/jobs", as_="a-writer", json=body())
    assert reply.status == 201
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.json["tenantId"] == "tenant-a"
    assert served.handed == []
    assert served.store.inserts == 1


async def test_a_key_not_yet_cached_goes_through_quart_which_caches_it(served: Served) -> None:
    first = await served.api.call("POST", "/jobs", as_="a-writer", json=body())
    second = await served.api.call("POST", "/jobs", as_="a-writer", json=body())
    assert (first.status, second.status) == (201, 201)
    assert served.handed == [None]  # only the first: Quart's authentication cached the key


@pytest.mark.parametrize(
    ("as_", "sent", "headers", "status"),
    [
        ("a-writer", {"jobType": "noop"}, {}, 400),  # the schema refuses it
        ("a-writer", body(jobType="no-such-type"), {}, 400),  # validation.py refuses it
        ("a-writer", body("tenant-b"), {}, 403),  # another tenant than the key's
        ("a-reader", body(), {}, 403),  # the role may not create
        ("a-writer", "{not json", {"Content-Type": "application/json"}, 400),
        ("a-writer", body(), {"Content-Type": "text/plain"}, 415),
        (None, body(), {}, 401),
    ],
    ids=["schema", "job-type", "tenant", "role", "malformed", "media-type", "no-key"],
)
async def test_a_refused_create_is_handed_to_quart_before_any_store_call(
    served: Served,
    as_: str | None,
    sent: Any,
    headers: dict[str, str],
    status: int,
) -> None:
    await served.warm("a-writer", "a-reader")
    kwargs: dict[str, Any] = {"data": sent} if isinstance(sent, str) else {"json": sent}
    if "Content-Type" in headers and "json" in kwargs:
        kwargs = {"data": "{}", "headers": headers}
    elif headers:
        kwargs["headers"] = headers
    reply = await served.api.call("POST", "/jobs", as_=as_, **kwargs)
    assert reply.status == status, reply.text
    assert list(reply.json) == ["error"]
    assert served.handed == [None]
    assert served.store.inserts == 0


async def test_a_store_failure_is_answered_by_quart_without_a_second_insert(
    served: Served,
) -> None:
    await served.warm("a-writer")
    served.store.fail = StoreError("connection refused")
    reply = await served.api.call("POST", "/jobs", as_="a-writer", json=body())
    assert reply.status == 503
    assert reply.json == {"error": "job store unavailable, retry later"}
    assert reply.headers["Retry-After"] == "1"
    assert served.store.inserts == 1
    assert len(served.handed) == 1
    assert isinstance(served.handed[0], StoreError)
    records = await served.audit_written("tenant-a")
    assert [(r["action"], r["status"]) for r in records] == [("POST /jobs", 503)]


async def test_a_handed_over_create_is_not_authenticated_a_second_time(
    served: Served,
) -> None:
    """The key's cache entry expires while the store hangs: Quart answers the 503 as the
    caller the fast path authenticated, without a second key lookup (and its wait)."""
    await served.warm("a-writer")
    authenticator = tenancy_of(served.api.app).authenticator
    served.store.during_insert = lambda: authenticator.forget(served.api.key_ids["a-writer"])
    served.store.fail = StoreError("no answer")
    reads = served.store.key_reads
    reply = await served.api.call("POST", "/jobs", as_="a-writer", json=body())
    assert reply.status == 503
    assert served.store.key_reads == reads
    records = await served.audit_written("tenant-a")
    assert [(r["keyId"], r["status"]) for r in records] == [(served.api.key_ids["a-writer"], 503)]


async def test_a_duplicate_key_is_a_409_naming_the_holder_after_one_insert(
    served: Served,
) -> None:
    await served.warm("a-writer")
    sent = body()
    created = await served.api.call("POST", "/jobs", as_="a-writer", json=sent)
    again = await served.api.call("POST", "/jobs", as_="a-writer", json=sent)
    assert (created.status, again.status) == (201, 409)
    assert again.json["jobId"] == created.json["id"]
    assert served.store.inserts == 2  # one each: Quart did not insert again
    assert len(served.handed) == 1


async def test_a_body_over_the_limit_is_quarts_413(served: Served) -> None:
    await served.warm("a-writer")
    big = body(payload={"blob": "x" * (1024 * 1024)})
    reply = await served.api.call("POST", "/jobs", as_="a-writer", json=big)
    assert reply.status == 413
    assert served.handed == [None]
    assert served.store.inserts == 0


async def test_fast_creates_are_counted_in_the_request_metrics(served: Served) -> None:
    await served.warm("a-writer")
    metrics = served.api.deps.metrics
    labels = {"method": "POST", "route": "/jobs", "status": "201"}
    before = metrics.registry.get_sample_value("api_requests_total", labels) or 0
    for _ in range(3):
        await served.api.call("POST", "/jobs", as_="a-writer", json=body())
    assert served.handed == []
    assert metrics.registry.get_sample_value("api_requests_total", labels) == before + 3
    timed = {"method": "POST", "route": "/jobs"}
    assert metrics.registry.get_sample_value("api_request_duration_seconds_count", timed) == 3


async def test_the_calls_of_one_budget_share_one_deadline(autojump_clock: MockClock) -> None:
    calls = BoundedCalls(1.0)
    async with trio.open_nursery() as nursery:
        calls.attach(nursery)

        async def slow() -> None:
            await trio.sleep(0.6)

        with calls.request_budget():
            await calls.call(slow)  # 0.6 s of the 1 s budget
            with pytest.raises(StoreError, match="did not answer"):
                await calls.call(slow)  # 0.4 s left: too little
        await calls.call(slow)  # outside the budget: a whole second again


async def test_an_unexpected_error_before_the_store_is_quarts_json_500(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    await served.warm("a-writer")

    def broken(*args: Any, **kwargs: Any) -> Job:
        raise KeyError("secret_column")

    monkeypatch.setattr("jobscheduler.api.routes.create.parse_create_request", broken)
    reply = await served.api.call("POST", "/jobs", as_="a-writer", json=body())
    assert reply.status == 500
    assert reply.json == {"error": "internal error"}
    assert served.handed == [None]
    assert served.store.inserts == 0


def session(token: str, csrf: str | None = None) -> dict[str, str]:
    """The headers of a dashboard session holding ``token`` (with a CSRF header if given)."""
    headers = {"Cookie": f"{SESSION_COOKIE}={token}"}
    if csrf is not None:
        headers[CSRF_HEADER] = csrf
    return headers


async def test_a_dashboard_session_with_its_csrf_token_is_served_without_quart(
    served: Served,
) -> None:
    await served.warm("a-writer")
    token = served.api.tokens["a-writer"]
    headers = session(token, csrf_token(token))
    reply = await served.api.call("POST", "/jobs", headers=headers, json=body())
    assert reply.status == 201, reply.text
    assert served.handed == []


async def test_a_dashboard_session_without_its_csrf_token_is_quarts_403(served: Served) -> None:
    await served.warm("a-writer")
    token = served.api.tokens["a-writer"]
    reply = await served.api.call("POST", "/jobs", headers=session(token), json=body())
    assert reply.status == 403
    assert "CSRF" in reply.json["error"]
    assert served.handed == [None]
    assert served.store.inserts == 0
