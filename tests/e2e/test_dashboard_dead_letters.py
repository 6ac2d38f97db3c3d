"""The Dead letters view in a real browser (headless Chromium) against a live
``jobscheduler dev`` with ``AUTH=required``, signed in with the admin key: dead letters
grouped by job type page by page, and a group retried after a confirmation.

The groups are checked against ``GET /jobs?status=dlq`` and the retry against the jobs'
replays in the store, not only the page's own words. The repeated steps are in
dashboard_steps.
"""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import chromium, wait_until

from .conftest import wait_for_job
from .dashboard_steps import (
    TENANT,
    DevFactory,
    JobBody,
    answer_confirmation,
    click,
    dead_letters,
    listed,
    rows,
    sign_in,
    stored,
    text_of,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_dead_letters_are_grouped_as_the_api_lists_them_and_a_group_is_retried(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    flaky = await dead_letters(
        client, server, [job_body(jobType="flaky", payload={"failRate": 1}) for _ in range(3)]
    )
    [http] = await dead_letters(
        client, server, [job_body(jobType="http", payload={"url": "http://169.254.169.254/"})]
    )
    expected: dict[str, int] = {}
    for job in await listed(client, server, status="dlq"):
        expected[job["jobType"]] = expected.get(job["jobType"], 0) + 1
    assert expected == {"flaky": 3, "http": 1}

    def groups(driver: WebDriver) -> dict[str, int]:
        return {r["jobType"]: int(r["count"]) for r in rows(driver, "dlq", "jobType", "count")}

    with chromium() as driver:
        sign_in(driver, server)
        # Three a page: the newest three are grouped, "Show older" adds the next page.
        driver.get(f"{server.url}/ui/dead-letters?tenantId={TENANT}&limit=3")
        wait_until(driver, lambda d: sum(groups(d).values()) == 3, "the newest page grouped")
        assert "older ones not grouped yet" in text_of(driver, "dlq-status")
        click(driver, "#dlq-more")
        wait_until(driver, lambda d: groups(d) == expected, "both pages grouped")
        wait_until(
            driver, lambda d: not d.find_element(By.ID, "dlq-more").is_displayed(), "no older"
        )
        driver.get(f"{server.url}/ui/dead-letters?tenantId={TENANT}")
        wait_until(driver, lambda d: groups(d) == expected, "two groups with their counts")
        errors = driver.find_element(By.CSS_SELECTOR, "#dlq tbody").text
        assert "simulated failure" in errors
        assert "link-local" in errors

        # Retry the flaky group: declined first (nothing changes), then accepted.
        button = '#dlq tr[data-job-type="flaky"] button[data-retry-group]'
        click(driver, button)
        question = answer_confirmation(driver, accept=False)
        assert question.startswith('Retry 3 flaky dead letters that failed with "')
        wait_until(driver, lambda d: text_of(d, "dlq-result") == "Nothing done.", "declined")
        assert [(await stored(client, server, j)).get("replays") for j in flaky] == [None] * 3
        click(driver, button)
        answer_confirmation(driver)
        wait_until(
            driver,
            lambda d: text_of(d, "dlq-result") == "3 of 3 dead letters retried.",
            "the group retried",
        )
    # Each of the group's jobs was replayed once (they fail again: failRate 1); the other
    # group's job was not touched.
    for job_id in flaky:
        job = await wait_for_job(client, server, job_id, lambda j: j["status"] == "dlq")
        assert [r["previousStatus"] for r in job["replays"]] == ["dlq"]
    assert "replays" not in await stored(client, server, http)
