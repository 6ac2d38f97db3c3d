"""What a tenant's key may see and do in the dashboard, in a real browser (headless
Chromium) against a live ``jobscheduler dev`` with ``AUTH=required``: a writer's key sees
only its tenant's jobs and may act on them; a reader's key sees no action, and a write forged
with its session cookie is refused (CSRF check, then the role).

What the buttons did, or did not do, is checked against what the API says the store holds.
The repeated steps are in dashboard_steps.
"""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.by import By

from jobscheduler.api.session import CSRF_HEADER, SESSION_COOKIE, csrf_token
from tests.support.browser import chromium, wait_until

from .conftest import wait_for_job
from .dashboard_steps import (
    FUTURE,
    TENANT,
    DevFactory,
    JobBody,
    click_action,
    create,
    create_template,
    dead_letters,
    rows,
    sign_in,
    stored,
    table_ids,
    text_of,
    visible_actions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_a_writer_key_signs_in_sees_its_tenants_job_and_may_act(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory()
    writer = await server.create_key(client, TENANT, "writer")
    waiting = await create(client, server, job_body(scheduledAt=FUTURE))
    other = await create(client, server, job_body(tenantId="tenant-other", scheduledAt=FUTURE))
    with chromium() as driver:
        sign_in(driver, server, writer)
        # The key's tenant is the page's, whatever the query names.
        driver.get(f"{server.url}/ui/jobs?tenantId=tenant-other")
        wait_until(driver, lambda d: table_ids(d) == [waiting], "the tenant's job only")
        driver.get(f"{server.url}/ui/jobs/{waiting}")
        wait_until(driver, lambda d: visible_actions(d) == ["cancel"], "cancel offered")
        click_action(driver, "cancel")
        await wait_for_job(client, server, waiting, lambda job: job["status"] == "cancelled")
    # The other tenant's job was never shown, nor touched.
    assert (await stored(client, server, other))["status"] == "pending"


async def test_a_reader_key_sees_no_actions_and_a_forged_write_with_its_cookie_is_refused(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory()
    reader = await server.create_key(client, TENANT, "reader")
    waiting = await create(client, server, job_body(scheduledAt=FUTURE))
    await create_template(client, server, job_body(cron="0 * * * *"))
    await dead_letters(client, server, [job_body(jobType="flaky", payload={"failRate": 1})])
    with chromium() as driver:
        sign_in(driver, server, reader)
        driver.get(f"{server.url}/ui/jobs/{waiting}")
        wait_until(driver, lambda d: text_of(d, "job-status") == "pending", "the detail")
        assert driver.find_elements(By.CSS_SELECTOR, "button[data-action]") == []
        assert driver.find_elements(By.ID, "edit-template") == []
        # No selection, no bulk buttons, no row actions on the lists either.
        driver.get(f"{server.url}/ui/jobs")
        wait_until(driver, lambda d: waiting in table_ids(d), "the job listed")
        assert driver.find_elements(By.CSS_SELECTOR, "#bulk, #select-page, input.pick-row") == []
        driver.get(f"{server.url}/ui/cron")
        wait_until(driver, lambda d: len(rows(d, "templates")) == 1, "the template listed")
        assert driver.find_elements(By.CSS_SELECTOR, "#templates button") == []
        driver.get(f"{server.url}/ui/dead-letters")
        wait_until(driver, lambda d: len(rows(d, "dlq")) == 1, "the dead letter listed")
        assert driver.find_elements(By.CSS_SELECTOR, "#dlq button") == []

        cookie = driver.get_cookie(SESSION_COOKIE)
        assert cookie is not None
        assert cookie["httpOnly"]
        # A forged write from the page itself (the browser sends the cookie): refused.
        status = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"fetch('/jobs/{waiting}/cancel', {{method: 'POST'}}).then(r => done(r.status));"
        )
        assert status == 403
    # The same forged POSTs with the cookie, without and with the session's CSRF token: the
    # first fails the CSRF check, the second the reader's role; all are 403.
    session = {"Cookie": f"{SESSION_COOKIE}={cookie['value']}"}
    bulk = {"filter": {"tenantId": TENANT, "ids": [waiting]}}
    async with httpx.AsyncClient(timeout=10.0) as anonymous:
        for headers in (session, {**session, CSRF_HEADER: csrf_token(reader)}):
            forged = await anonymous.post(f"{server.url}/jobs/{waiting}/cancel", headers=headers)
            assert forged.status_code == 403, forged.text
            forged = await anonymous.post(f"{server.url}/jobs/cancel", json=bulk, headers=headers)
            assert forged.status_code == 403, forged.text
        # The cookie does read: it is a real session of the reader's key.
        read = await anonymous.get(f"{server.url}/jobs/{waiting}", headers=session)
        assert read.status_code == 200
    job = await stored(client, server, waiting)
    assert job["status"] == "pending"
    assert job.get("cancelRequestedAt") is None
