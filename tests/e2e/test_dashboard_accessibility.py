"""The dashboard's views on a phone-width screen and with the keyboard alone, in a real
browser (headless Chromium) against a live ``jobscheduler dev`` with ``AUTH=required``,
signed in with the admin key: no view scrolls sideways at phone width, and Tab reaches every
view, the filters and a job's link, which Enter opens.

The repeated steps are in dashboard_steps.
"""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import PHONE, chromium, wait_until

from .dashboard_steps import (
    FUTURE,
    TENANT,
    DevFactory,
    JobBody,
    create,
    create_template,
    rows,
    sign_in,
    table_ids,
    text_of,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def page_fits(driver: WebDriver) -> bool:
    """Nothing on the page is wider than the window (no sideways scrolling)."""
    fits: bool = driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )
    return fits


async def test_the_views_fit_a_phone_width_screen(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory()
    job_id = await create(client, server, job_body(scheduledAt=FUTURE))
    template = await create_template(client, server, job_body(cron="0 9 * * 1-5"))
    with chromium(PHONE) as driver:
        sign_in(driver, server)
        assert driver.execute_script("return window.innerWidth") == PHONE[0]
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}")
        wait_until(driver, lambda d: job_id in table_ids(d), "the job listed")
        assert page_fits(driver)
        driver.get(f"{server.url}/ui/jobs/{template}")
        wait_until(driver, lambda d: text_of(d, "job-status") == "pending", "the template")
        assert page_fits(driver)
        driver.get(f"{server.url}/ui/cron?tenantId={TENANT}")
        wait_until(driver, lambda d: len(rows(d, "templates")) == 1, "the template listed")
        assert page_fits(driver)


async def test_the_views_are_reachable_with_the_keyboard_alone(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory()
    job_id = await create(client, server, job_body(scheduledAt=FUTURE))
    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}")
        wait_until(driver, lambda d: table_ids(d) == [job_id], "the job listed")
        focused: list[str] = []
        for _ in range(90):
            ActionChains(driver).send_keys(Keys.TAB).perform()
            active = driver.switch_to.active_element
            focused.append(active.get_attribute("href") or active.get_attribute("id") or "")
            if active.get_attribute("href") == f"{server.url}/ui/jobs/{job_id}":
                break
        # (The navigation carries the tenant being looked at: compare without the query.)
        reached = {url.split("?")[0] for url in focused}
        for view in ("/ui", "/ui/jobs", "/ui/dead-letters", "/ui/cron", "/ui/workflows"):
            assert f"{server.url}{view}" in reached, focused
        # The tenant picker, the filters and the page's select-all box are on the way.
        for control in ("switch-tenant", "f-key", "f-sort", "select-page"):
            assert control in focused, focused
        # Enter on the focused job link opens its detail.
        driver.switch_to.active_element.send_keys(Keys.ENTER)
        wait_until(
            driver, lambda d: d.current_url == f"{server.url}/ui/jobs/{job_id}", "the detail"
        )
