"""The dashboard in a real browser (headless Chromium) against a live ``jobscheduler dev``
with ``AUTH=required``, signed in with API keys.

Every test checks what the page shows, and what its buttons did, against what the API says
the store holds, not only the page's own words. The repeated steps are in dashboard_steps.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from jobscheduler.ui._session import CSRF_HEADER, SESSION_COOKIE, csrf_token
from tests.support.browser import PHONE, chromium, wait_until

from .conftest import DevServer, readme_env, wait_for_job
from .dashboard_steps import (
    FUTURE,
    LAYOUT_SHIFT_OBSERVER,
    TENANT,
    answer_confirmation,
    by_status,
    click,
    click_action,
    create,
    create_template,
    dead_letters,
    listed,
    refreshes,
    rows,
    sign_in,
    stored,
    table_ids,
    text_of,
    visible_actions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

DevFactory = Callable[..., Awaitable[DevServer]]
JobBody = Callable[..., dict[str, Any]]

# Kept importable from here for other dashboard test modules.
__all__ = ["LAYOUT_SHIFT_OBSERVER", "refreshes", "sign_in", "table_ids"]


def page_fits(driver: WebDriver) -> bool:
    """Nothing on the page is wider than the window (no sideways scrolling)."""
    fits: bool = driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )
    return fits


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

        # A created range that holds nothing.
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}&createdFrom=2098-01-01T00:00")
        wait_until(
            driver,
            lambda d: text_of(d, "jobs-status") == "No job matches these filters.",
            "the empty range",
        )
        assert driver.find_element(By.ID, "f-from").get_attribute("value") == "2098-01-01T00:00"

        # Open the detail page from the table, then cancel the job there.
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}&status=pending")
        wait_until(driver, lambda d: waiting in table_ids(d), "the job listed")
        driver.find_element(By.LINK_TEXT, waiting).click()
        wait_until(driver, lambda d: text_of(d, "job-status") == "pending", "the detail")
        job = await stored(client, server, waiting)
        fields = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#fields dd')]"
            ".map(d => [d.dataset.field, d.textContent]))"
        )
        assert fields["id"] == job["id"]
        assert fields["idempotencyKey"] == job["idempotencyKey"] == "order-17"
        assert fields["scheduledAt"] == job["scheduledAt"]
        payload = driver.find_element(By.ID, "payload").text
        assert '"note": "later"' in payload
        click_action(driver, "cancel")
        await wait_for_job(client, server, waiting, lambda j: j["status"] == "cancelled")
        wait_until(driver, lambda d: visible_actions(d) == ["retry"], "retry offered")
    assert (await stored(client, server, late))["status"] == "pending"


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


async def test_a_template_page_shows_its_schedule_is_paused_resumed_edited_and_its_ledger(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    template = await create_template(
        client, server, job_body(cron="0 9 * * 1-5", timezone="Europe/Paris")
    )
    # Fires within a minute: its ledger gets a line while the test runs.
    every_minute = await create_template(client, server, job_body(cron="* * * * *"))
    nxt = (await client.get(f"{server.url}/jobs/{template}/next", params={"count": 5})).json()

    def fires(driver: WebDriver) -> list[str]:
        found: list[str] = driver.execute_script(
            "return [...document.querySelectorAll('#fires li')].map(li => li.textContent)"
        )
        return found

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs/{template}")
        wait_until(driver, lambda d: len(fires(d)) == 5, "five fire times")
        assert [text.split(" ")[0] for text in fires(driver)] == [
            fire["at"] for fire in nxt["fireTimes"]
        ]
        assert text_of(driver, "cron-words") == "At 09:00, Monday through Friday, Europe/Paris"
        assert rows(driver, "ledger")[0]["cells"] == "No fire time yet."

        click_action(driver, "pause")
        await wait_for_job(client, server, template, lambda job: job["status"] == "paused")
        click_action(driver, "resume")
        await wait_for_job(client, server, template, lambda job: job["status"] == "pending")

        # Edit: a bad time zone is refused with the reason beside the form; then a good edit.
        driver.find_element(By.CSS_SELECTOR, "#edit-template summary").click()
        cron = driver.find_element(By.ID, "t-cron")
        cron.clear()
        cron.send_keys("30 6 * * *")
        zone = driver.find_element(By.ID, "t-timezone")
        zone.clear()
        zone.send_keys("Mars/Olympus")
        driver.find_element(By.ID, "template-save").click()
        wait_until(driver, lambda d: "timezone" in text_of(d, "template-error"), "the error")
        assert zone.get_attribute("aria-invalid") == "true"
        assert (await stored(client, server, template))["cron"] == "0 9 * * 1-5"
        zone.clear()
        zone.send_keys("UTC")
        driver.find_element(By.ID, "template-save").click()
        edited = await wait_for_job(client, server, template, lambda j: j["cron"] == "30 6 * * *")
        assert edited["timezone"] == "UTC"
        assert edited["scheduledAt"].endswith("T06:30:00Z")
        wait_until(driver, lambda d: text_of(d, "cron-words") == "At 06:30, UTC", "new words")
        assert text_of(driver, "template-error") == ""

        # The every-minute template's first fire time, as the ledger API records it.
        driver.get(f"{server.url}/ui/jobs/{every_minute}")
        before = (await stored(client, server, every_minute))["scheduledAt"]
        await wait_for_job(
            client, server, every_minute, lambda j: j["scheduledAt"] != before, timeout=75.0
        )
        ledger = (await client.get(f"{server.url}/jobs/{every_minute}/occurrences")).json()
        item = ledger["occurrences"][0]
        wait_until(
            driver,
            lambda d: rows(d, "ledger", "fireAt")[0]["fireAt"] == item["fireAt"],
            "the fire time in the ledger",
        )
        line = rows(driver, "ledger", "outcome")[0]
        assert line["outcome"] == item["status"] == "spawned"
        assert item["runId"] in line["cells"]

    # The same ledger from the command line (the README's `jobscheduler cron ledger`).
    done = await trio.run_process(
        [sys.executable, "-m", "jobscheduler", "cron", "ledger", every_minute, "--json"],
        env=readme_env(server),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    # Newest first; the template may have fired again since the API's read.
    printed = {o["fireAt"]: o for o in json.loads(done.stdout)}
    assert (printed[item["fireAt"]]["status"], printed[item["fireAt"]]["runId"]) == (
        "spawned",
        item["runId"],
    )


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


async def test_cron_view_lists_templates_in_words_and_acts_on_them_from_the_list(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    template = await create_template(client, server, job_body(cron="*/15 * * * *"))
    one_off = await create(client, server, job_body(scheduledAt=FUTURE))
    job = await stored(client, server, template)

    def row(driver: WebDriver) -> dict[str, str]:
        [found] = rows(driver, "templates", "jobId", "status")
        return found

    scope = f'#templates tr[data-job-id="{template}"]'
    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/cron?tenantId={TENANT}")
        wait_until(driver, lambda d: len(rows(d, "templates")) == 1, "the template listed")
        listed_row = row(driver)
        assert listed_row["jobId"] == template != one_off
        cells = listed_row["cells"].split(" | ")
        assert cells[1:5] == [
            "*/15 * * * *",
            "Every 15 minutes, UTC",
            "pending",
            job["scheduledAt"],
        ]
        assert visible_actions(driver, scope) == ["pause", "trigger", "delete"]

        click_action(driver, "pause", scope)
        await wait_for_job(client, server, template, lambda j: j["status"] == "paused")
        wait_until(driver, lambda d: row(d)["status"] == "paused", "paused in the list")
        assert visible_actions(driver, scope) == ["resume", "trigger", "delete"]
        click_action(driver, "resume", scope)
        await wait_for_job(client, server, template, lambda j: j["status"] == "pending")

        click_action(driver, "trigger", scope)
        wait_until(driver, lambda d: text_of(d, "cron-result").startswith("Started run"), "run")
        runs = await listed(client, server, templateId=template)
        assert len(runs) == 1
        assert text_of(driver, "cron-result") == f"Started run {runs[0]['id']}."

        click_action(driver, "delete", scope)
        assert answer_confirmation(driver) == "Delete this template? Its past runs stay."
        await wait_for_job(client, server, template, lambda j: j["status"] == "cancelled")
        wait_until(driver, lambda d: row(d)["status"] == "cancelled", "retired in the list")
        assert visible_actions(driver, scope) == []


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
        for view in ("/ui", "/ui/jobs", "/ui/dead-letters", "/ui/cron"):
            assert f"{server.url}{view}" in reached, focused
        # The filters and the page's select-all box are on the way to the rows.
        for control in ("f-tenant", "f-key", "f-sort", "select-page"):
            assert control in focused, focused
        # Enter on the focused job link opens its detail.
        driver.switch_to.active_element.send_keys(Keys.ENTER)
        wait_until(
            driver, lambda d: d.current_url == f"{server.url}/ui/jobs/{job_id}", "the detail"
        )


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
