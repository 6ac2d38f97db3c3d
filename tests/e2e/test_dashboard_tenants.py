"""Every tenant at once, in a real browser (headless Chromium) against a live
``jobscheduler dev`` with ``AUTH=off`` (its default, where the operator sees every tenant):
a store holding the jobs of three tenants shows all of them under "All tenants", with a
Tenant column, in Jobs, Dead letters and Cron; the Overview's ``dlq`` link and its Dead
letters tile land on those dead letters; the tenant picker offers the three tenants and
narrows every view to one. No page falls back to a tenant that does not exist.

What the pages show is checked against ``GET /jobs?allTenants=true`` and ``GET /tenants``.
The repeated steps are in dashboard_steps.
"""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.support.browser import chromium, wait_until

from .dashboard_steps import (
    FUTURE,
    DevFactory,
    JobBody,
    create,
    create_template,
    dead_letters,
    element,
    rows,
    table_ids,
    text_of,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

TENANTS = ("acme", "globex", "initech")


def tenants_of(driver: WebDriver, table: str) -> Counter[str]:
    """How many rows of ``#table`` each tenant has (the rows' ``data-tenant``, or the Tenant
    column's text)."""
    found: list[str] = driver.execute_script(
        "return [...document.querySelectorAll(`#${arguments[0]} tbody tr`)]"
        ".map(r => r.dataset.tenant || r.querySelector('td.tenant').textContent)",
        table,
    )
    return Counter(found)


async def test_with_auth_off_all_tenants_shows_every_tenants_jobs_and_the_dlq_link_lands_there(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory(AUTH="off", UI_REFRESH="1s")
    assert server.key is None
    for tenant in TENANTS:
        await create(client, server, job_body(tenantId=tenant, scheduledAt=FUTURE))
    dead = await dead_letters(
        client,
        server,
        [job_body(tenantId=t, jobType="flaky", payload={"failRate": 1}) for t in TENANTS],
    )
    template = await create_template(
        client, server, job_body(tenantId="globex", cron="0 9 * * 1-5", timezone="Europe/Paris")
    )
    every = (await client.get(f"{server.url}/jobs", params={"allTenants": "true"})).json()
    assert Counter(job["tenantId"] for job in every) == {"acme": 2, "globex": 3, "initech": 2}
    assert (await client.get(f"{server.url}/tenants")).json()["tenants"] == list(TENANTS)

    with chromium() as driver:
        # AUTH=off: no sign-in; the page opens on every tenant.
        driver.get(f"{server.url}/ui")
        wait_until(driver, lambda d: text_of(d, "ov-dlq") == "3", "three dead letters")
        assert text_of(driver, "ov-scope") == "all tenants"

        # The Overview's dlq row: every tenant's dead letters in the Jobs view.
        driver.find_element(By.CSS_SELECTOR, '#ov-counts tr[data-status="dlq"] a').click()
        wait_until(driver, lambda d: set(table_ids(d)) == set(dead), "the three dead letters")
        assert "tenantId" not in driver.current_url
        assert tenants_of(driver, "jobs") == Counter(TENANTS)
        assert text_of(driver, "jobs-status") == "3 jobs on this page."

        # All tenants, no filter: every job of the store, the template marked as one.
        driver.get(f"{server.url}/ui/jobs")
        wait_until(driver, lambda d: len(table_ids(d)) == len(every), "every job")
        assert table_ids(driver) == [job["id"] for job in every]
        assert tenants_of(driver, "jobs") == Counter(job["tenantId"] for job in every)
        tag = element(driver, f'#jobs tr[data-job-id="{template}"] .tag', "title")
        assert tag == {"text": "template", "title": "0 9 * * 1-5"}

        # The Overview's Dead letters tile: grouped per tenant.
        driver.get(f"{server.url}/ui")
        driver.find_element(By.ID, "ov-dlq-link").click()
        wait_until(driver, lambda d: len(rows(d, "dlq")) == 3, "a group per tenant")
        assert driver.current_url == f"{server.url}/ui/dead-letters"
        assert tenants_of(driver, "dlq") == Counter(TENANTS)
        assert {r["jobType"] for r in rows(driver, "dlq", "jobType")} == {"flaky"}

        # Cron: every tenant's templates.
        driver.get(f"{server.url}/ui/cron")
        wait_until(driver, lambda d: len(rows(d, "templates")) == 1, "the template")
        assert tenants_of(driver, "templates") == Counter(["globex"])

        # The picker offers the three tenants; one narrows the views (no Tenant column).
        options = "return [...document.querySelectorAll('#switch-tenant option')].map(o => o.value)"
        wait_until(
            driver, lambda d: d.execute_script(options) == ["", *TENANTS], "the tenants offered"
        )
        Select(driver.find_element(By.ID, "switch-tenant")).select_by_value("initech")
        driver.find_element(By.CSS_SELECTOR, "#tenant-switcher button").click()
        wait_until(driver, lambda d: d.current_url.endswith("?tenantId=initech"), "initech")
        driver.find_element(By.CSS_SELECTOR, ".top nav a[href^='/ui/jobs']").click()
        initech = [job["id"] for job in every if job["tenantId"] == "initech"]
        wait_until(driver, lambda d: table_ids(d) == initech, "initech's jobs only")
        assert driver.find_elements(By.CSS_SELECTOR, "#jobs td.tenant") == []
        assert text_of(driver, "scope") == "initech"
