"""Steps the dashboard's browser tests repeat: sign in, create jobs through the API, read
a table the script fills, press an action button, answer a confirmation.

Tables are read in one script call each (the page's script replaces rows on every
refresh, so element handles go stale); every wait is bounded (tests.support.browser).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.expected_conditions import alert_is_present

from tests.support.browser import wait_until
from tests.support.dev_server import DevServer
from tests.support.jobs_api import create_job

from .conftest import wait_for_job

TENANT = "tenant-e2e"
FUTURE = "2099-01-01T00:00:00Z"

#: The ``dev_factory`` and ``job_body`` fixtures' types (tests/e2e/conftest.py).
DevFactory = Callable[..., Awaitable[DevServer]]
JobBody = Callable[..., dict[str, Any]]

#: Sums the page's layout shifts from now on (Chromium's Layout Instability API).
LAYOUT_SHIFT_OBSERVER = (
    "window.shift = 0;"
    "new PerformanceObserver(list => { for (const e of list.getEntries())"
    " if (!e.hadRecentInput) window.shift += e.value; })"
    ".observe({type: 'layout-shift', buffered: false});"
)


def shown(api_time: str, zone: str = "UTC") -> str:
    """An API time (RFC 3339) as every view shows it: ``2026-12-02 09:00:00 UTC``, or in a
    zone ``2026-12-02 10:00:00 Europe/Paris`` (to the second)."""
    at = datetime.fromisoformat(api_time.replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
    return f"{at:%Y-%m-%d %H:%M:%S} {zone}"


def refreshes(driver: WebDriver) -> int:
    """How many times the page's script refreshed its data."""
    count: str | None = driver.execute_script("return document.body.dataset.refreshes")
    return int(count or 0)


def rows(driver: WebDriver, table: str, *fields: str) -> list[dict[str, str]]:
    """The rows of ``#table``'s body: each row's ``data-*`` values named by ``fields``,
    plus ``cells``, the text of each cell joined by " | "."""
    found: list[dict[str, str]] = driver.execute_script(
        "const [table, fields] = arguments;"
        "return [...document.querySelectorAll(`#${table} tbody tr`)].map(r => Object.assign("
        "  Object.fromEntries(fields.map(f => [f, r.dataset[f]])),"
        "  {cells: [...r.cells].map(c => c.textContent.trim()).join(' | ')}))",
        table,
        list(fields),
    )
    return found


def element(driver: WebDriver, css: str, *attributes: str) -> dict[str, str]:
    """The first element ``css`` selects, read in one step (a refresh may replace it between
    two): its ``text`` and the ``attributes`` named."""
    found: dict[str, str] = driver.execute_script(
        "const [css, names] = arguments; const e = document.querySelector(css);"
        "return Object.assign(Object.fromEntries(names.map(n => [n, e.getAttribute(n)])),"
        "  {text: e.textContent.trim()})",
        css,
        list(attributes),
    )
    return found


def table_ids(driver: WebDriver) -> list[str]:
    """The job ids in the Jobs table, in order."""
    return [row["jobId"] for row in rows(driver, "jobs", "jobId")]


def visible_actions(driver: WebDriver, scope: str = "") -> list[str]:
    """The ``data-action`` buttons shown (within the CSS ``scope``, default the page)."""
    found: list[str] = driver.execute_script(
        "return [...document.querySelectorAll(`${arguments[0]} button[data-action]`)]"
        ".filter(b => !b.hidden).map(b => b.dataset.action)",
        scope,
    )
    return found


def click(driver: WebDriver, css: str) -> None:
    """Click the element ``css`` selects; again if a refresh replaced it meanwhile."""

    def clicked(d: WebDriver) -> bool:
        try:
            d.find_element(By.CSS_SELECTOR, css).click()
        except (StaleElementReferenceException, NoSuchElementException):
            return False
        return True

    wait_until(driver, clicked, f"a click on {css}")


def click_action(driver: WebDriver, action: str, scope: str = "") -> None:
    """Wait for the ``action`` button (within ``scope``) and press it."""
    wait_until(driver, lambda d: action in visible_actions(d, scope), f"the {action} button")
    click(driver, f'{scope} button[data-action="{action}"]'.strip())


def answer_confirmation(driver: WebDriver, *, accept: bool = True) -> str:
    """Wait for the page's confirm() dialog, answer it; returns its question."""
    alert = wait_until(driver, alert_is_present(), "the confirmation")
    question: str = alert.text
    if accept:
        alert.accept()
    else:
        alert.dismiss()
    return question


def text_of(driver: WebDriver, element_id: str) -> str:
    text: str = driver.execute_script(
        "return document.getElementById(arguments[0]).textContent", element_id
    )
    return text


def sign_in(driver: WebDriver, server: DevServer, key: str | None = None) -> None:
    """Sign the browser in through the form with ``key`` (default: the server's admin key);
    the session cookie then carries every page and API call."""
    driver.get(f"{server.url}/ui/signin")
    field = driver.find_element(By.ID, "key")
    field.send_keys(key or server.key or "")
    field.send_keys(Keys.ENTER)
    wait_until(driver, lambda d: d.current_url == f"{server.url}/ui", "signed in")


async def create(http: httpx.AsyncClient, server: DevServer, body: dict[str, Any]) -> str:
    """``POST /jobs`` (503s retried with the same key); the new job's id."""
    job_id: str = (await create_job(http, server, body))["id"]
    return job_id


async def create_template(http: httpx.AsyncClient, server: DevServer, body: dict[str, Any]) -> str:
    """A cron template from a job body (its ``scheduledAt`` dropped: the schedule sets it)."""
    return await create(http, server, {k: v for k, v in body.items() if k != "scheduledAt"})


async def dead_letters(
    http: httpx.AsyncClient, server: DevServer, bodies: list[dict[str, Any]]
) -> list[str]:
    """Create jobs that fail on their only attempt; their ids once all are in dlq."""
    ids = [await create(http, server, {**body, "maxAttempts": 1}) for body in bodies]
    for job_id in ids:
        await wait_for_job(http, server, job_id, lambda job: job["status"] == "dlq")
    return ids


async def stored(http: httpx.AsyncClient, server: DevServer, job_id: str) -> dict[str, Any]:
    """The job as the API reads it from the store."""
    response = await http.get(f"{server.url}/jobs/{job_id}")
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()
    return job


async def by_status(http: httpx.AsyncClient, server: DevServer) -> dict[str, int]:
    """The tenant's job counts by status (``GET /stats``)."""
    response = await http.get(f"{server.url}/stats", params={"tenantId": TENANT})
    counts: dict[str, int] = response.json()["byStatus"]
    return counts


async def listed(
    http: httpx.AsyncClient, server: DevServer, **params: str | list[str]
) -> list[dict[str, Any]]:
    """One ``GET /jobs`` page of the tenant's jobs."""
    response = await http.get(f"{server.url}/jobs", params={"tenantId": TENANT, **params})
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()
    return jobs
