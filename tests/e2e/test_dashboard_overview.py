"""The Overview in a real browser (headless Chromium) against a live ``jobscheduler dev``:
what it shows is checked against ``GET /stats/overview`` and ``GET /jobs``, not only against
the page's own words."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio
from selenium.common.exceptions import NoSuchElementException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.support.browser import chromium, wait_until
from tests.support.dev_server import DevServer

from .conftest import wait_for_job
from .dashboard_steps import FUTURE, LAYOUT_SHIFT_OBSERVER, create, refreshes, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

TENANT = "tenant-e2e"
OTHER = "tenant-other"


def counts(driver: WebDriver) -> dict[str, str]:
    """The Overview's counts by status as shown, read in one script."""
    shown: dict[str, str] = driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#ov-counts tbody tr')]"
        ".map(r => [r.dataset.status, r.querySelector('.num').textContent]))"
    )
    return shown


def options(driver: WebDriver) -> list[str]:
    """The values the tenant picker offers, in order ("" is "All tenants")."""
    found: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#switch-tenant option')].map(o => o.value)"
    )
    return found


def as_shown(by_status: dict[str, int]) -> dict[str, str]:
    return {status: str(n) for status, n in by_status.items()}


async def overview(http: httpx.AsyncClient, server: DevServer, **params: str) -> dict[str, Any]:
    response = await http.get(f"{server.url}/stats/overview", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_overview_shows_counts_chart_executors_and_leader_and_refreshes_in_place(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    for _ in range(3):
        await create(client, server, job_body(scheduledAt=FUTURE))
    done = [await create(client, server, job_body()) for _ in range(4)]
    for job_id in done:
        await wait_for_job(client, server, job_id, lambda job: job["status"] == "completed")

    with chromium() as driver:
        sign_in(driver, server)
        api = await overview(client, server)
        assert api["byStatus"]["completed"] == 4
        wait_until(driver, lambda d: counts(d) == as_shown(api["byStatus"]), "the API's counts")
        assert driver.find_element(By.ID, "ov-total").text == str(api["total"])
        assert driver.find_element(By.ID, "ov-dlq").text == "0"

        # The chart's points: the completions of this minute (or the last), as the API has them.
        # Read in one script: each refresh draws the chart anew.
        total, bars = driver.execute_script(
            "const chart = document.querySelector('#ov-throughput svg');"
            "return [chart.dataset.completed,"
            " [...chart.querySelectorAll('g[data-minute]')].map(b => Number(b.dataset.completed))];"
        )
        assert total == str(sum(api["throughput"]["completed"]))
        assert int(total) >= 4
        assert len(bars) == 60
        assert sum(bars) >= 4

        # dev runs a scheduler (always the leader) and an executor serving every job type.
        cluster = api["cluster"]
        leader = cluster["leader"]["id"].split(":", 1)[1]
        wait_until(driver, lambda d: d.find_element(By.ID, "ov-leader").text == leader, "leader")
        [executor] = cluster["executors"]
        # Read in one script: a refresh may replace the row between two element reads.
        worker, text = driver.execute_script(
            "const r = document.querySelector('#ov-executors tbody tr[data-worker]');"
            "return [r.dataset.worker, r.textContent];"
        )
        assert worker == executor["id"]
        assert "noop" in executor["jobTypes"]
        assert "noop" in text

        # New jobs show up on the next refresh: no reload, no layout shift.
        driver.execute_script(LAYOUT_SHIFT_OBSERVER + "window.notReloaded = true;")
        seen = refreshes(driver)
        for _ in range(2):
            await create(client, server, job_body(scheduledAt=FUTURE))
        wait_until(driver, lambda d: counts(d)["pending"] == "5", "the refreshed counts")
        wait_until(driver, lambda d: refreshes(d) >= seen + 2, "two more refreshes")
        assert driver.execute_script("return window.notReloaded") is True
        assert driver.execute_script("return window.shift") == 0
        listed = await client.get(
            f"{server.url}/jobs", params={"tenantId": TENANT, "status": "pending"}
        )
        assert len(listed.json()) == 5


async def test_an_all_tenant_key_switches_tenant_and_a_tenant_key_sees_no_switcher(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    for _ in range(2):
        await create(client, server, job_body(scheduledAt=FUTURE))
    for _ in range(3):
        await create(client, server, job_body(scheduledAt=FUTURE, tenantId=OTHER))
    reader = await server.create_key(client, TENANT, "reader")

    with chromium() as driver:
        sign_in(driver, server)
        every = await overview(client, server)
        wait_until(driver, lambda d: counts(d)["pending"] == "5", "every tenant's jobs")
        assert every["byStatus"]["pending"] == 5

        # The picker offers the tenants that hold jobs, as GET /tenants lists them.
        tenants = (await client.get(f"{server.url}/tenants")).json()["tenants"]
        assert tenants == [TENANT, OTHER]
        wait_until(driver, lambda d: options(d) == ["", *tenants], "the tenants offered")
        Select(driver.find_element(By.ID, "switch-tenant")).select_by_value(OTHER)
        driver.find_element(By.CSS_SELECTOR, "#tenant-switcher button").send_keys(Keys.ENTER)
        wait_until(driver, lambda d: f"tenantId={OTHER}" in d.current_url, "the chosen tenant")
        other = await overview(client, server, tenantId=OTHER)
        assert other["byStatus"]["pending"] == 3
        wait_until(driver, lambda d: counts(d) == as_shown(other["byStatus"]), "its counts")
        assert driver.find_element(By.ID, "ov-scope").text == OTHER
        # The choice follows the navigation.
        jobs_link = driver.find_element(By.CSS_SELECTOR, ".top nav a[href^='/ui/jobs']")
        assert f"tenantId={OTHER}" in (jobs_link.get_attribute("href") or "")

        wait_until(driver, lambda d: options(d) == ["", *tenants], "the tenants offered")
        Select(driver.find_element(By.ID, "switch-tenant")).select_by_value("")
        driver.find_element(By.CSS_SELECTOR, "#tenant-switcher button").click()
        wait_until(driver, lambda d: "tenantId" not in d.current_url, "every tenant")
        wait_until(driver, lambda d: counts(d)["pending"] == "5", "every tenant again")

    with chromium() as driver:
        sign_in(driver, server, reader)
        own = await overview(
            client, server, tenantId=TENANT
        )  # what the reader's tenant holds, read with the admin key
        wait_until(driver, lambda d: counts(d) == as_shown(own["byStatus"]), "its own counts")
        assert counts(driver)["pending"] == "2"
        with pytest.raises(NoSuchElementException):
            driver.find_element(By.ID, "tenant-switcher")
        assert driver.find_element(By.ID, "ov-no-cluster").is_displayed()
        # Asking for another tenant in the address changes nothing: the key decides.
        driver.get(f"{server.url}/ui?tenantId={OTHER}")
        wait_until(driver, lambda d: counts(d)["pending"] == "2", "still its own counts")


def held_rows(driver: WebDriver) -> dict[str, str]:
    """The Overview's held-back scopes as shown (scope -> waiting), read in one script."""
    shown: dict[str, str] = driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#ov-held tbody tr[data-scope]')]"
        ".map(r => [r.dataset.scope, r.querySelector('.num').textContent]))"
    )
    return shown


async def test_overview_lists_the_keys_flow_control_holds_back(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    limit = await client.put(
        f"{server.url}/flow/limits/slow", params={"tenantId": TENANT}, json={"concurrency": 1}
    )
    assert limit.status_code == 200, limit.text
    # The leader reads the overrides every second: jobs created sooner may run unlimited.
    await trio.sleep(1.5)
    with chromium() as driver:
        sign_in(driver, server)
        wait_until(
            driver,
            lambda d: "Nothing held back." in d.find_element(By.ID, "ov-held").text,
            "the empty held-back card",
        )
        # One customer's four jobs due at once under a limit of one: three wait.
        scope = f"{TENANT}/slow/customer-42"
        for _ in range(4):
            body = job_body(
                jobType="slow", concurrencyKey="customer-42", payload={"sleepMs": 20000}
            )
            await create(client, server, body)
        wait_until(driver, lambda d: scope in held_rows(d), "the held key")
        held = (await client.get(f"{server.url}/flow/held", params={"tenantId": TENANT})).json()
        [hold] = [h for h in held["holds"] if h.get("key") == "customer-42"]
        assert hold["waiting"] >= 1
        api = await overview(client, server, tenantId=TENANT)
        assert [h["key"] for h in api["held"]["holds"]] == ["customer-42"]
        row = driver.execute_script(
            f"return document.querySelector('#ov-held tr[data-scope=\"{scope}\"]').textContent"
        )
        assert "customer-42" in row
        assert "1 of 1 running" in row
