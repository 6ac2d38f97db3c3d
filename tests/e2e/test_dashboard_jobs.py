"""The Jobs view and a job's detail page in a real browser (headless Chromium) against a
live ``jobscheduler dev`` with ``AUTH=required``, signed in with the admin key: filters, sort,
live refresh, cursor pages, selection and bulk retry; a job's fields, attempts and result, and
its actions (cancel, retry with an edited payload).

Every test checks what the page shows, and what its buttons did, against what the API says
the store holds, not only the page's own words. The repeated steps are in dashboard_steps.
"""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.support.browser import chromium, wait_until

from .conftest import wait_for_job
from .dashboard_steps import (
    FUTURE,
    LAYOUT_SHIFT_OBSERVER,
    TENANT,
    DevFactory,
    JobBody,
    answer_confirmation,
    by_status,
    click,
    click_action,
    create,
    dead_letters,
    listed,
    refreshes,
    rows,
    shown,
    sign_in,
    stored,
    table_ids,
    text_of,
    visible_actions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_a_job_created_through_the_api_appears_filters_opens_and_is_cancelled(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    waiting = await create(
        client,
        server,
        job_body(idempotencyKey="order-17", scheduledAt=FUTURE, payload={"note": "later", "n": 1}),
    )
    done = await create(client, server, job_body())
    await wait_for_job(client, server, done, lambda job: job["status"] == "completed")

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/")
        assert driver.current_url == f"{server.url}/ui"
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}")
        wait_until(driver, lambda d: set(table_ids(d)) == {waiting, done}, "both jobs listed")
        statuses = {r["jobId"]: r["status"] for r in rows(driver, "jobs", "jobId", "status")}
        assert statuses == {waiting: "pending", done: "completed"}

        # A job created while the page is open appears without a reload.
        driver.execute_script("window.notReloaded = true")
        late = await create(
            client,
            server,
            job_body(idempotencyKey="order-18", scheduledAt="2099-06-01T00:00:00Z"),
        )
        wait_until(driver, lambda d: table_ids(d)[:1] == [late], "the new job listed first")
        assert driver.execute_script("return window.notReloaded") is True

        # Filter by keyboard: tick "pending" and "queued" with Space, type a key prefix,
        # press Enter. The page lists what the API lists for the same filters.
        for status in ("pending", "queued"):
            box = driver.find_element(By.CSS_SELECTOR, f'#f-status input[value="{status}"]')
            box.send_keys(Keys.SPACE)
        key = driver.find_element(By.ID, "f-key")
        key.send_keys("order-")
        key.send_keys(Keys.ENTER)
        wait_until(driver, lambda d: "key=order-" in d.current_url, "the filtered page")
        wait_until(driver, lambda d: table_ids(d) == [late, waiting], "pending orders only")
        expected = await listed(client, server, status=["pending", "queued"])
        assert [j["id"] for j in expected if j["idempotencyKey"].startswith("order-")] == [
            late,
            waiting,
        ]

        # Sorted by due time, soonest first: the order flips.
        Select(driver.find_element(By.ID, "f-sort")).select_by_value("scheduledAt")
        driver.find_element(By.ID, "f-key").send_keys(Keys.ENTER)
        wait_until(driver, lambda d: table_ids(d) == [waiting, late], "soonest due first")
        api_order = await listed(
            client, server, status="pending", idempotencyKeyPrefix="order-", sort="scheduledAt"
        )
        assert [j["id"] for j in api_order] == table_ids(driver)

        # Refreshes with unchanged data move nothing on the page.
        driver.execute_script(LAYOUT_SHIFT_OBSERVER)
        seen = refreshes(driver)
        wait_until(driver, lambda d: refreshes(d) >= seen + 2, "two more refreshes")
        assert driver.execute_script("return window.shift") == 0

        # A created range that holds nothing: nothing to act on "all matching".
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}&createdFrom=2098-01-01T00:00")
        wait_until(
            driver,
            lambda d: text_of(d, "jobs-status") == "No job matches these filters.",
            "the empty range",
        )
        assert driver.find_element(By.ID, "f-from").get_attribute("value") == "2098-01-01T00:00"
        matching = 'button[data-bulk][data-scope="filter"]'
        assert [b.is_enabled() for b in driver.find_elements(By.CSS_SELECTOR, matching)] == [
            False,
            False,
        ]

        # Open the detail page from the table, then cancel the job there.
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}&status=pending")
        wait_until(driver, lambda d: waiting in table_ids(d), "the job listed")
        assert [b.is_enabled() for b in driver.find_elements(By.CSS_SELECTOR, matching)] == [
            True,
            True,
        ]
        driver.find_element(By.LINK_TEXT, waiting).click()
        wait_until(driver, lambda d: text_of(d, "job-status") == "pending", "the detail")
        job = await stored(client, server, waiting)
        fields = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#fields dd')]"
            ".map(d => [d.dataset.field, d.textContent]))"
        )
        assert fields["id"] == job["id"]
        assert fields["idempotencyKey"] == job["idempotencyKey"] == "order-17"
        assert fields["scheduledAt"] == shown(job["scheduledAt"])
        payload = driver.find_element(By.ID, "payload").text
        assert '"note": "later"' in payload
        click_action(driver, "cancel")
        await wait_for_job(client, server, waiting, lambda j: j["status"] == "cancelled")
        wait_until(driver, lambda d: visible_actions(d) == ["retry"], "retry offered")
    assert (await stored(client, server, late))["status"] == "pending"


async def test_job_detail_shows_attempts_and_retries_a_dead_letter_with_an_edited_payload(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory()
    [failing] = await dead_letters(
        client, server, [job_body(jobType="flaky", payload={"failRate": 1})]
    )
    slow = await create(client, server, job_body(jobType="slow", payload={"sleepMs": 0}))
    await wait_for_job(client, server, slow, lambda job: job["status"] == "completed")
    history = (await client.get(f"{server.url}/jobs/{failing}/attempts")).json()["attempts"]
    assert [a["outcome"] for a in history] == ["failed"]

    def outcomes(driver: WebDriver) -> list[str]:
        found: list[str] = driver.execute_script(
            "return [...document.querySelectorAll('#attempts li[data-outcome]')]"
            ".map(li => li.dataset.outcome)"
        )
        return found

    def retry_with(driver: WebDriver, text: str) -> None:
        edit = driver.find_element(By.ID, "edit-payload")
        edit.clear()
        edit.send_keys(text)
        driver.find_element(By.ID, "edit-send").click()

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs/{slow}")
        wait_until(driver, lambda d: outcomes(d) == ["completed"], "the completed attempt")
        assert (await stored(client, server, slow))["result"] == {"sleptMs": 0}
        assert '"sleptMs": 0' in driver.find_element(By.ID, "result").text

        driver.get(f"{server.url}/ui/jobs/{failing}")
        wait_until(driver, lambda d: outcomes(d) == ["failed"], "the failed attempt")
        errors = driver.find_element(By.CSS_SELECTOR, "#attempts .error").text
        assert history[0]["errorMessage"] in errors
        assert "simulated failure" in driver.find_element(By.ID, "last-error").text
        # The last error comes first, the attempts that led to it after.
        assert driver.execute_script(
            "return document.getElementById('error-box').compareDocumentPosition("
            "document.getElementById('attempts')) & Node.DOCUMENT_POSITION_FOLLOWING"
        )
        # A dlq job offers retry (plain and with an edited payload), not cancel.
        assert visible_actions(driver) == ["retry"]
        driver.find_element(By.CSS_SELECTOR, "#edit-retry summary").click()
        assert '"failRate": 1' in driver.find_element(By.ID, "edit-payload").get_attribute("value")
        # Not an object: refused on the page, before any request.
        retry_with(driver, "[1, 2]")
        assert text_of(driver, "edit-error") == "The payload must be a JSON object."
        # The job type's own validator refuses it server-side: the reason shows inline.
        retry_with(driver, '{"failRate": 5}')
        wait_until(
            driver,
            lambda d: "failRate: must be a number between 0 and 1" in text_of(d, "edit-error"),
            "the server's validation error",
        )
        assert (await stored(client, server, failing))["status"] == "dlq"
        # A valid edit: the job runs again, with the new payload.
        retry_with(driver, '{"failRate": 0, "note": "fixed"}')
        done = await wait_for_job(client, server, failing, lambda j: j["status"] == "completed")
        assert done["payload"] == {"failRate": 0, "note": "fixed"}
        assert done["replays"][0]["previousStatus"] == "dlq"
        wait_until(driver, lambda d: outcomes(d) == ["failed", "completed"], "both attempts")
        # The retry started run 1, whose attempts count from #1 again.
        badges = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#attempts .badge")]
        assert badges == ["#1 failed", "run 1 #1 completed"]


async def test_jobs_pages_selection_and_a_filtered_bulk_retry_of_200_jobs(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory()
    batch = {
        "jobs": [job_body(idempotencyKey=f"bulk-{i:03}", scheduledAt=FUTURE) for i in range(200)]
    }
    created = await client.post(f"{server.url}/jobs/batch", json=batch)
    assert created.status_code == 200, created.text
    cancelled = await client.post(
        f"{server.url}/jobs/cancel", json={"filter": {"tenantId": TENANT, "status": "pending"}}
    )
    assert cancelled.json()["changed"] == 200
    # Jobs outside the filter (another key, another status): they must not be touched.
    bystander = await create(client, server, job_body(scheduledAt=FUTURE))
    other = await create(client, server, job_body(idempotencyKey="other-1", scheduledAt=FUTURE))
    await client.post(f"{server.url}/jobs/{other}/cancel")
    assert await by_status(client, server) == {"cancelled": 201, "pending": 1}

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}&status=cancelled&key=bulk-&limit=25")
        wait_until(driver, lambda d: len(table_ids(d)) == 25, "the first page")
        first = table_ids(driver)
        api_first = await listed(
            client, server, status="cancelled", idempotencyKeyPrefix="bulk-", limit="25"
        )
        assert first == [j["id"] for j in api_first]

        # Pages follow the API's cursors: next, next, back, first.
        driver.find_element(By.ID, "page-next").click()
        wait_until(driver, lambda d: text_of(d, "page-number") == "Page 2", "page 2")
        wait_until(driver, lambda d: len(set(table_ids(d)) - set(first)) == 25, "new rows")
        second = table_ids(driver)
        driver.find_element(By.ID, "page-next").click()
        wait_until(driver, lambda d: text_of(d, "page-number") == "Page 3", "page 3")
        driver.find_element(By.ID, "page-prev").click()
        wait_until(driver, lambda d: table_ids(d) == second, "back to page 2")
        driver.find_element(By.ID, "page-first").click()
        wait_until(driver, lambda d: table_ids(d) == first, "back to page 1")

        # Select the whole page, then unselect one: retry the 24 selected.
        driver.find_element(By.ID, "select-page").click()
        click(driver, f'input.pick-row[data-job-id="{first[0]}"]')
        assert text_of(driver, "selected-count") == "24 selected"
        driver.find_element(
            By.CSS_SELECTOR, 'button[data-bulk="retry"][data-scope="selection"]'
        ).click()
        assert answer_confirmation(driver) == "Retry 24 of the 24 selected jobs?"
        wait_until(
            driver,
            lambda d: text_of(d, "bulk-result") == "24 of 24 matching jobs changed.",
            "the selection retried",
        )
        for job_id in first[1:]:
            job = await stored(client, server, job_id)
            assert [r["previousStatus"] for r in job["replays"]] == ["cancelled"]
            assert job["status"] != "cancelled"
        assert (await stored(client, server, first[0]))["status"] == "cancelled"
        assert text_of(driver, "selected-count") == "0 selected"

        # Everything matching the filter (not only this page): the 176 still cancelled.
        driver.find_element(
            By.CSS_SELECTOR, 'button[data-bulk="retry"][data-scope="filter"]'
        ).click()
        assert answer_confirmation(driver) == (
            f"Retry 176 jobs matching these filters (tenant {TENANT})?"
        )
        wait_until(
            driver,
            lambda d: text_of(d, "bulk-result") == "176 of 176 matching jobs changed.",
            "the bulk result",
        )
    # The retried jobs are due now: they may already have run. Only `other` stays cancelled.
    counts = await by_status(client, server)
    assert counts.get("cancelled") == 1
    assert sum(counts.values()) == 202
    assert (await stored(client, server, other))["status"] == "cancelled"
    assert (await stored(client, server, bystander))["status"] == "pending"
