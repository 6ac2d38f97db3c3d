"""Routes as such: ``/healthz``, an unknown route (404) and a wrong method (405) answered in
JSON, and the request metrics labelled with the route template rather than the raw path.

Runs through the ``api`` fixture of ``conftest.py``, both ways (``[fast]``/``[quart]``).
"""

from __future__ import annotations

import pytest

from jobscheduler.domain.model import new_job_id
from jobscheduler.store import JobStore

from .api_support import Api, create_body
from .conftest import make_job, sample

# ----------------------------------------------------------------------- health


async def test_healthz_is_200_ok_in_plain_text(api: Api) -> None:
    reply = await api.get("/healthz")
    assert reply.status == 200
    assert reply.content_type.startswith("text/plain")
    assert reply.text == "ok"


# ----------------------------------------------------------------------- routing errors


@pytest.mark.parametrize("path", ["/ui/nope", "/job", "/jobs/abc/extra", "/metrics", "/healthz/x"])
async def test_unknown_route_is_404_json(api: Api, path: str) -> None:
    (await api.get(path)).assert_error(404, "not found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/jobs/66f9a1c2e4b0a3d5c8f12a01"),
        ("POST", "/jobs/66f9a1c2e4b0a3d5c8f12a01"),
        ("PUT", "/jobs"),
        ("DELETE", "/jobs"),
        ("POST", "/healthz"),
    ],
)
async def test_wrong_method_is_405_json(api: Api, method: str, path: str) -> None:
    (await api.request(method, path)).assert_error(405, "method not allowed")


# ----------------------------------------------------------------------- metrics


async def test_request_metrics_are_labelled_with_the_route_template_not_the_raw_path(
    api: Api, store: JobStore
) -> None:
    job = make_job()
    await store.insert(job)
    await api.get(f"/jobs/{job.id}")
    await api.get(f"/jobs/{new_job_id()}")
    await api.get("/jobs", tenantId="tenant-a")
    await api.create(create_body())
    await api.get("/no/such/route")

    def count(method: str, route: str, status: str) -> float:
        labels = {"method": method, "route": route, "status": status}
        return sample(api.deps.metrics, "api_requests_total", labels)

    assert count("GET", "/jobs/<job_id>", "200") == 1
    assert count("GET", "/jobs/<job_id>", "404") == 1
    assert count("GET", "/jobs", "200") == 1
    assert count("POST", "/jobs", "201") == 1
    assert count("GET", "unmatched", "404") == 1
    assert count("GET", f"/jobs/{job.id}", "200") == 0
    routes = {
        s.labels["route"]
        for metric in api.deps.metrics.registry.collect()
        if metric.name == "api_requests"
        for s in metric.samples
    }
    assert routes == {"/jobs/<job_id>", "/jobs", "unmatched"}
    duration = "api_request_duration_seconds_count"
    assert sample(api.deps.metrics, duration, {"method": "GET", "route": "/jobs/<job_id>"}) == 2
