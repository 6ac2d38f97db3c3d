"""Per-tenant quotas through the HTTP API (``AUTH=required``): the create rate, a token
bucket per key (a batch counts each job), and the cap on a tenant's unfinished jobs."""

from __future__ import annotations

from trio.testing import MockClock

from .conftest import DepsFactory, sample
from .tenancy_support import auth_deps, body, serve_auth

# ----------------------------------------------------------------------- quotas


async def test_the_create_rate_is_a_token_bucket_per_key(
    make_deps: DepsFactory, mock_clock: MockClock
) -> None:
    deps = auth_deps(make_deps, quota_create_rate=1.0, quota_create_burst=2)
    async with serve_auth(deps) as api:
        statuses = [
            (await api.call("POST", "/jobs", as_="a-writer", json=body())).status for _ in range(3)
        ]
        assert statuses == [201, 201, 429]
        refused = await api.call("POST", "/jobs", as_="a-writer", json=body())
        assert refused.headers["Retry-After"] == "1"
        assert "rate" in refused.json["error"]
        # Another key of the same tenant has its own bucket.
        assert (await api.call("POST", "/jobs", as_="a-admin", json=body())).status == 201
        mock_clock.jump(1.0)
        assert (await api.call("POST", "/jobs", as_="a-writer", json=body())).status == 201
        assert sample(deps.metrics, "api_quota_rejections_total", {"reason": "rate"}) == 2.0


async def test_unfinished_jobs_are_capped_per_tenant(
    make_deps: DepsFactory, mock_clock: MockClock
) -> None:
    deps = auth_deps(make_deps, quota_max_unfinished=2)
    async with serve_auth(deps) as api:
        for _ in range(2):
            assert (await api.call("POST", "/jobs", as_="a-writer", json=body())).status == 201
        refused = await api.call("POST", "/jobs", as_="a-writer", json=body())
        assert refused.status == 429
        assert refused.headers["Retry-After"] == "5"
        # Other tenants are not affected.
        other = await api.call("POST", "/jobs", as_="b-writer", json=body(tenant="tenant-b"))
        assert other.status == 201
        assert sample(deps.metrics, "api_quota_rejections_total", {"reason": "unfinished"}) == 1


async def test_a_refused_duplicate_does_not_use_up_the_unfinished_quota(
    make_deps: DepsFactory, mock_clock: MockClock
) -> None:
    async with serve_auth(auth_deps(make_deps, quota_max_unfinished=2)) as api:
        dup = body()
        assert (await api.call("POST", "/jobs", as_="a-writer", json=dup)).status == 201
        assert (await api.call("POST", "/jobs", as_="a-writer", json=dup)).status == 409
        assert (await api.call("POST", "/jobs", as_="a-writer", json=body())).status == 201
        assert (await api.call("POST", "/jobs", as_="a-writer", json=body())).status == 429


async def test_a_batch_counts_each_job_against_the_create_rate(
    make_deps: DepsFactory, mock_clock: MockClock
) -> None:
    deps = auth_deps(make_deps, quota_create_rate=1.0, quota_create_burst=3)
    async with serve_auth(deps) as api:
        batch = {"jobs": [body() for _ in range(3)]}
        assert (await api.call("POST", "/jobs/batch", as_="a-writer", json=batch)).status == 200
        refused = await api.call("POST", "/jobs/batch", as_="a-writer", json={"jobs": [body()]})
        assert refused.status == 429
        assert refused.headers["Retry-After"] == "1"
