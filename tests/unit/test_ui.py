"""The dashboard's server side: pages, redirects, static files and the status chart.

The pages are shells the script fills from the JSON API (tested in the browser suite,
tests/e2e/test_dashboard_*.py); here we prove what the server itself renders.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator

import attrs
import pytest

from jobscheduler.api import create_app
from jobscheduler.api.ui._chart import STATUS_ORDER

from .api_support import Api, api_deps, serve
from .conftest import DepsFactory


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


async def test_root_redirects_to_the_dashboard(api: Api) -> None:
    response = await api.client.get("/")
    assert response.status_code == 302
    assert response.headers["Location"] == "/ui"


async def test_overview_is_a_shell_with_every_status_row_that_reads_the_overview_api(
    api: Api,
) -> None:
    reply = await api.get("/ui")
    assert reply.status == 200
    assert reply.content_type.startswith("text/html")
    rows = re.findall(r'<tr data-status="(\w+)">', reply.text)
    assert rows == list(STATUS_ORDER)
    assert 'data-api="/stats/overview"' in reply.text
    assert "overview.js" in reply.text


async def test_overview_of_a_chosen_tenant_reads_that_tenant(api: Api) -> None:
    reply = await api.get("/ui", tenantId="acme & co")
    assert 'data-api="/stats/overview?tenantId=acme+%26+co"' in reply.text
    assert "tenantId=acme%20%26%20co" in reply.text  # the status rows link to its jobs


async def test_pages_forbid_framing_and_foreign_scripts(api: Api) -> None:
    response = await api.client.get("/ui/jobs", headers={"Authorization": f"Bearer {api.token}"})
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def _data(page: str, name: str) -> str:
    """An attribute of the Jobs table, unescaped."""
    match = re.search(rf'<table class="jobs"[^>]*\bdata-{name}="([^"]*)"', page)
    assert match, page
    return html.unescape(match.group(1))


async def test_jobs_page_keeps_valid_filters_and_drops_invalid_ones(api: Api) -> None:
    reply = await api.get("/ui/jobs", tenantId="acme", status="dlq", limit="100")
    assert reply.status == 200
    assert _data(reply.text, "query") == "tenantId=acme&status=dlq&limit=100"
    assert re.search(r'value="dlq"\s+checked', reply.text)
    assert not re.search(r'value="pending"\s+checked', reply.text)
    reply = await api.get(
        "/ui/jobs", tenantId="acme", status="bogus", limit="7", sort="id", createdFrom="today"
    )
    assert _data(reply.text, "query") == "tenantId=acme&limit=50"
    assert json.loads(_data(reply.text, "filter")) == {"tenantId": "acme"}


@pytest.mark.parametrize("path", ["/ui/jobs", "/ui/dead-letters", "/ui/cron", "/ui/workflows"])
async def test_without_a_tenant_an_all_tenant_principal_sees_every_tenant_never_a_default(
    api: Api, path: str
) -> None:
    reply = await api.get(path)
    assert reply.status == 200
    assert 'data-tenant=""' in reply.text
    assert '<th scope="col" class="tenant">Tenant</th>' in reply.text
    assert re.search(r'<option value="" selected>All tenants</option>', reply.text)
    assert "default" not in reply.text
    chosen = await api.get(path, tenantId="acme")
    assert 'data-tenant="acme"' in chosen.text
    assert 'class="tenant"' not in chosen.text
    assert '<option value="acme" selected>acme</option>' in chosen.text


async def test_the_jobs_page_of_every_tenant_asks_the_api_for_all_tenants(api: Api) -> None:
    reply = await api.get("/ui/jobs", status="dlq")
    assert _data(reply.text, "query") == "allTenants=true&status=dlq&limit=50"
    # The bulk actions' filter names no tenant: every tenant's matching jobs.
    assert json.loads(_data(reply.text, "filter")) == {"status": ["dlq"]}


async def test_jobs_page_escapes_the_tenant_it_echoes(api: Api) -> None:
    reply = await api.get("/ui/jobs", tenantId='"><script>x</script>')
    assert "<script>x</script>" not in reply.text
    assert "&lt;script&gt;" in reply.text


async def test_job_page_with_a_malformed_id_is_a_400_page(api: Api) -> None:
    reply = await api.get("/ui/jobs/not-an-id")
    assert reply.status == 400
    assert reply.content_type.startswith("text/html")
    assert "24 hexadecimal characters" in reply.text


async def test_job_page_carries_the_lowercased_id_for_the_script(api: Api) -> None:
    job_id = "ABCDEF0123456789ABCDEF01"
    reply = await api.get(f"/ui/jobs/{job_id}")
    assert reply.status == 200
    assert f'data-job-id="{job_id.lower()}"' in reply.text


async def test_static_script_and_stylesheet_are_served_from_the_package(api: Api) -> None:
    page = await api.get("/ui/jobs")
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    # The shared helpers first, then every view's own file (each registers itself).
    assert scripts[0] == "/ui/static/ui.js"
    assert {"/ui/static/ui_jobs.js", "/ui/static/ui_job.js"} <= set(scripts)
    for src in scripts:
        script = await api.client.get(src)
        assert script.status_code == 200, src
        assert "javascript" in script.content_type
    style = await api.client.get("/ui/static/ui.css")
    assert style.status_code == 200
    assert style.content_type.startswith("text/css")


async def test_with_authentication_off_sign_in_opens_the_dashboard_directly(
    make_deps: DepsFactory,
) -> None:
    deps = api_deps(make_deps)
    deps = attrs.evolve(deps, settings=attrs.evolve(deps.settings, auth="off"))
    app = create_app(deps)
    async with app.test_app() as test_app:
        client = test_app.test_client()
        response = await client.get("/ui/signin")
        assert response.status_code == 303
        assert response.headers["Location"] == "/ui"
        page = await client.get("/ui/jobs/" + "c" * 24)
        text = await page.get_data(as_text=True)
        assert 'data-action="cancel"' in text  # the operator may act
        assert "Sign out" not in text


async def test_with_keys_required_a_page_without_a_session_goes_to_sign_in(api: Api) -> None:
    response = await api.client.get("/ui/jobs")
    assert response.status_code == 303
    assert response.headers["Location"] == "/ui/signin"
    form = await api.client.get("/ui/signin")
    assert form.status_code == 200
    assert "text/html" in form.content_type


async def test_a_cron_expression_is_described_in_words_with_its_zone(api: Api) -> None:
    reply = await api.get("/ui/describe", cron="0 9 * * 1-5", timezone="Europe/Paris")
    assert reply.status == 200
    assert reply.json == {"text": "At 09:00, Monday through Friday, Europe/Paris"}


async def test_describing_an_invalid_expression_is_a_400_saying_why(api: Api) -> None:
    (await api.get("/ui/describe", cron="61 * * * *")).assert_error(400, "cron")
    (await api.get("/ui/describe")).assert_error(400, "cron")


@pytest.mark.parametrize(
    ("path", "table", "scan"),
    [
        ("/ui/dead-letters", "dlq", 250),
        ("/ui/cron", "templates", 1000),
        # The largest page GET /workflows answers.
        ("/ui/workflows", "workflows", 500),
    ],
)
async def test_grouped_views_render_their_tenant_and_scan_bound(
    api: Api, path: str, table: str, scan: int
) -> None:
    reply = await api.get(path, tenantId="acme")
    assert reply.status == 200
    assert f'id="{table}" data-tenant="acme" data-scan="{scan}"' in reply.text
    assert 'aria-current="page"' in reply.text


async def test_static_files_cannot_reach_outside_their_folder(api: Api) -> None:
    response = await api.client.get("/ui/static/../_routes.py")
    assert response.status_code == 404
    response = await api.client.get("/ui/static/%2e%2e/_routes.py")
    assert response.status_code == 404


async def test_a_workflow_page_is_a_shell_of_its_id_and_a_malformed_id_is_a_400(api: Api) -> None:
    workflow_id = "ABCDEF0123456789abcdef01"
    reply = await api.get(f"/ui/workflows/{workflow_id}")
    assert reply.status == 200
    assert f'data-workflow-id="{workflow_id.lower()}"' in reply.text
    assert '<a href="/ui/workflows" aria-current="page">Workflows</a>' in reply.text
    bad = await api.get("/ui/workflows/not-an-id")
    assert bad.status == 400
    assert "A workflow id is 24 hexadecimal characters." in bad.text
