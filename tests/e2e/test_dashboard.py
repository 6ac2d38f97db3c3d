"""The dashboard in a real browser (headless Chromium) against a live ``jobscheduler dev``.

Every test checks what the page shows against what the API says the store holds, not only
the page's own words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.expected_conditions import alert_is_present
from selenium.webdriver.support.ui import Select

from jobscheduler.ui._session import CSRF_HEADER, SESSION_COOKIE, csrf_token
from tests.support.browser import PHONE, chromium, wait_until

from .conftest import DevServer, wait_for_job

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

TENANT = "tenant-e2e"
FUTURE = "2099-01-01T00:00:00Z"


#: Sums the page's layout shifts from now on (Chromium's Layout Instability API).
LAYOUT_SHIFT_OBSERVER = (
    "window.shift = 0;"
    "new PerformanceObserver(list => { for (const e of list.getEntries())"
    " if (!e.hadRecentInput) window.shift += e.value; })"
    ".observe({type: 'layout-shift', buffered: false});"
)


def refreshes(driver: WebDriver) -> int:
    """How many times the page's script refreshed its data."""
    count: str | None = driver.execute_script("return document.body.dataset.refreshes")
    return int(count or 0)


def table_ids(driver: WebDriver) -> list[str]:
    """The job ids in the Jobs table, read in one script (the script replaces rows)."""
    ids: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#jobs tbody tr')].map(r => r.dataset.jobId)"
    )
    return ids


def sign_in(driver: WebDriver, server: DevServer, key: str | None = None) -> None:
    """Sign the browser in through the form with ``key`` (default: the server's admin key);
    the session cookie then carries every page and API call."""
    driver.get(f"{server.url}/ui/signin")
    field = driver.find_element(By.ID, "key")
    field.send_keys(key or server.key or "")
    field.send_keys(Keys.ENTER)
    wait_until(driver, lambda d: d.current_url == f"{server.url}/ui", "signed in")


async def create(http: httpx.AsyncClient, server: DevServer, body: dict[str, Any]) -> str:
    response = await http.post(f"{server.url}/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


async def test_a_job_created_through_the_api_appears_filters_and_opens_its_detail(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    waiting = await create(
        client, server, job_body(scheduledAt=FUTURE, payload={"note": "later", "n": 1})
    )
    done = await create(client, server, job_body())
    await wait_for_job(client, server, done, lambda job: job["status"] == "completed")

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/")
        assert driver.current_url == f"{server.url}/ui"
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}")
        wait_until(driver, lambda d: set(table_ids(d)) == {waiting, done}, "both jobs listed")
        statuses = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#jobs tbody tr')]"
            ".map(r => [r.dataset.jobId, r.dataset.status]))"
        )
        assert statuses == {waiting: "pending", done: "completed"}

        # A third job created while the page is open appears without a reload.
        driver.execute_script("window.notReloaded = true")
        late = await create(client, server, job_body(scheduledAt=FUTURE))
        wait_until(driver, lambda d: late in table_ids(d), "the new job listed by refresh")
        assert driver.execute_script("return window.notReloaded") is True

        # Filter by keyboard: choose "pending" and press Enter in the form.
        Select(driver.find_element(By.ID, "f-status")).select_by_value("pending")
        driver.find_element(By.ID, "f-tenant").send_keys(Keys.ENTER)
        wait_until(driver, lambda d: "status=pending" in d.current_url, "the filtered page")
        wait_until(driver, lambda d: set(table_ids(d)) == {waiting, late}, "pending jobs only")
        listed = await client.get(
            f"{server.url}/jobs", params={"tenantId": TENANT, "status": "pending"}
        )
        assert {job["id"] for job in listed.json()} == set(table_ids(driver))

        # Refreshes with unchanged data move nothing on the page.
        driver.execute_script(LAYOUT_SHIFT_OBSERVER)
        seen = refreshes(driver)
        wait_until(driver, lambda d: refreshes(d) >= seen + 2, "two more refreshes")
        assert driver.execute_script("return window.shift") == 0

        # Open the detail page from the table.
        driver.find_element(By.LINK_TEXT, waiting).click()
        wait_until(
            driver, lambda d: d.find_element(By.ID, "job-status").text == "pending", "the detail"
        )
        stored = (await client.get(f"{server.url}/jobs/{waiting}")).json()
        fields = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#fields dd')]"
            ".map(d => [d.dataset.field, d.textContent]))"
        )
        assert fields["id"] == stored["id"]
        assert fields["idempotencyKey"] == stored["idempotencyKey"]
        assert fields["scheduledAt"] == stored["scheduledAt"]
        payload = driver.find_element(By.ID, "payload").text
        assert '"note": "later"' in payload
        assert '"n": 1' in payload


async def test_jobs_page_fits_a_phone_width_screen(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    job_id = await create(client, server, job_body(scheduledAt=FUTURE))
    with chromium(PHONE) as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}")
        wait_until(driver, lambda d: table_ids(d) == [job_id], "the job listed")
        page_width = driver.execute_script("return document.documentElement.scrollWidth")
        viewport = driver.execute_script("return window.innerWidth")
        assert viewport == PHONE[0]
        assert page_width <= viewport


async def test_job_detail_shows_the_attempt_history_with_errors_and_the_result(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    failing = await create(
        client, server, job_body(jobType="flaky", payload={"failRate": 1}, maxAttempts=1)
    )
    slow = await create(client, server, job_body(jobType="slow", payload={"sleepMs": 0}))
    await wait_for_job(client, server, failing, lambda job: job["status"] == "dlq")
    await wait_for_job(client, server, slow, lambda job: job["status"] == "completed")
    history = (await client.get(f"{server.url}/jobs/{failing}/attempts")).json()["attempts"]
    assert [a["outcome"] for a in history] == ["failed"]

    def outcomes(driver: WebDriver) -> list[str]:
        found: list[str] = driver.execute_script(
            "return [...document.querySelectorAll('#attempts li[data-outcome]')]"
            ".map(li => li.dataset.outcome)"
        )
        return found

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs/{failing}")
        wait_until(driver, lambda d: outcomes(d) == ["failed"], "the failed attempt")
        errors = driver.find_element(By.CSS_SELECTOR, "#attempts .error").text
        assert history[0]["errorMessage"] in errors
        assert "simulated failure" in driver.find_element(By.ID, "last-error").text

        # A dlq job offers retry (plain and with an edited payload), not cancel; a payload
        # that is not a JSON object is refused on the page, before any request.
        visible = driver.execute_script(
            "return [...document.querySelectorAll('button[data-action]')]"
            ".filter(b => !b.hidden).map(b => b.dataset.action)"
        )
        assert visible == ["retry"]
        driver.find_element(By.CSS_SELECTOR, "#edit-retry summary").click()
        edit = driver.find_element(By.ID, "edit-payload")
        assert '"failRate": 1' in edit.get_attribute("value")
        edit.clear()
        edit.send_keys("[1, 2]")
        driver.find_element(By.ID, "edit-send").click()
        message = driver.find_element(By.ID, "edit-error").text
        assert message == "The payload must be a JSON object."
        assert (await client.get(f"{server.url}/jobs/{failing}")).json()["status"] == "dlq"

        driver.get(f"{server.url}/ui/jobs/{slow}")
        wait_until(driver, lambda d: outcomes(d) == ["completed"], "the completed attempt")
        stored = (await client.get(f"{server.url}/jobs/{slow}")).json()
        assert stored["result"] == {"sleptMs": 0}
        assert '"sleptMs": 0' in driver.find_element(By.ID, "result").text


async def test_a_template_shows_its_schedule_in_words_and_the_apis_next_fire_times(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    body = job_body(cron="0 9 * * 1-5", timezone="Europe/Paris")
    del body["scheduledAt"]
    template = await create(client, server, body)
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
        words = driver.find_element(By.ID, "cron-words").text
        assert words == "At 09:00, Monday through Friday, Europe/Paris"


async def test_dead_letters_are_grouped_by_job_type_and_error_as_the_api_lists_them(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    created = [
        await create(
            client, server, job_body(jobType="flaky", payload={"failRate": 1}, maxAttempts=1)
        )
        for _ in range(3)
    ]
    created.append(
        await create(
            client,
            server,
            job_body(jobType="http", payload={"url": "http://169.254.169.254/"}, maxAttempts=1),
        )
    )
    for job_id in created:
        await wait_for_job(client, server, job_id, lambda job: job["status"] == "dlq")
    listed = await client.get(f"{server.url}/jobs", params={"tenantId": TENANT, "status": "dlq"})
    expected: dict[str, int] = {}
    for job in listed.json():
        expected[job["jobType"]] = expected.get(job["jobType"], 0) + 1
    assert expected == {"flaky": 3, "http": 1}

    def groups(driver: WebDriver) -> dict[str, int]:
        found: dict[str, str] = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#dlq tbody tr')]"
            ".map(r => [r.dataset.jobType, r.dataset.count]))"
        )
        return {job_type: int(count) for job_type, count in found.items()}

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/dead-letters?tenantId={TENANT}")
        wait_until(driver, lambda d: groups(d) == expected, "two groups with their counts")
        errors = driver.find_element(By.CSS_SELECTOR, "#dlq tbody").text
        assert "simulated failure" in errors
        assert "link-local" in errors


async def test_cron_view_lists_the_tenants_templates_in_words(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    body = job_body(cron="*/15 * * * *")
    del body["scheduledAt"]
    template = await create(client, server, body)
    one_off = await create(client, server, job_body(scheduledAt=FUTURE))
    stored = (await client.get(f"{server.url}/jobs/{template}")).json()

    def rows(driver: WebDriver) -> list[list[str]]:
        found: list[list[str]] = driver.execute_script(
            "return [...document.querySelectorAll('#templates tbody tr')]"
            ".map(r => [r.dataset.jobId, ...[...r.cells].map(c => c.textContent)])"
        )
        return found

    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/cron?tenantId={TENANT}")
        wait_until(driver, lambda d: len(rows(d)) == 1, "the template listed")
        job_id, _name, expression, words, status, next_fire = rows(driver)[0]
        assert job_id == template != one_off
        assert expression == "*/15 * * * *"
        assert words == "Every 15 minutes, UTC"
        assert status == stored["status"] == "pending"
        assert next_fire == stored["scheduledAt"]


async def test_the_views_are_reachable_with_the_keyboard_alone(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    job_id = await create(client, server, job_body(scheduledAt=FUTURE))
    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}")
        wait_until(driver, lambda d: table_ids(d) == [job_id], "the job listed")
        focused: list[str] = []
        for _ in range(40):
            ActionChains(driver).send_keys(Keys.TAB).perform()
            active = driver.switch_to.active_element
            focused.append(active.get_attribute("href") or active.get_attribute("id") or "")
            if active.get_attribute("href") == f"{server.url}/ui/jobs/{job_id}":
                break
        # (The navigation carries the tenant being looked at: compare without the query.)
        reached = {url.split("?")[0] for url in focused}
        for view in ("/ui", "/ui/jobs", "/ui/dead-letters", "/ui/cron"):
            assert f"{server.url}{view}" in reached, focused
        # Enter on the focused job link opens its detail.
        driver.switch_to.active_element.send_keys(Keys.ENTER)
        wait_until(
            driver, lambda d: d.current_url == f"{server.url}/ui/jobs/{job_id}", "the detail"
        )


def visible_actions(driver: WebDriver) -> list[str]:
    found: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('button[data-action]')]"
        ".filter(b => !b.hidden).map(b => b.dataset.action)"
    )
    return found


async def test_actions_on_the_job_page_change_the_store(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    waiting = await create(client, server, job_body(scheduledAt=FUTURE))
    failed = await create(
        client, server, job_body(jobType="flaky", payload={"failRate": 1}, maxAttempts=1)
    )
    body = job_body(cron="0 9 * * 1-5", timezone="Europe/Paris")
    del body["scheduledAt"]
    template = await create(client, server, body)
    await wait_for_job(client, server, failed, lambda job: job["status"] == "dlq")

    async def status_of(job_id: str) -> str:
        status: str = (await client.get(f"{server.url}/jobs/{job_id}")).json()["status"]
        return status

    def click(driver: WebDriver, action: str) -> None:
        wait_until(driver, lambda d: action in visible_actions(d), f"the {action} button")
        driver.find_element(By.CSS_SELECTOR, f'button[data-action="{action}"]').click()

    with chromium() as driver:
        sign_in(driver, server)
        # Cancel a pending job.
        driver.get(f"{server.url}/ui/jobs/{waiting}")
        click(driver, "cancel")
        await wait_for_job(client, server, waiting, lambda job: job["status"] == "cancelled")
        wait_until(driver, lambda d: visible_actions(d) == ["retry"], "retry offered")

        # Retry a dead letter with an edited payload: it runs again, with the new payload.
        driver.get(f"{server.url}/ui/jobs/{failed}")
        wait_until(driver, lambda d: visible_actions(d) == ["retry"], "retry offered")
        driver.find_element(By.CSS_SELECTOR, "#edit-retry summary").click()
        edit = driver.find_element(By.ID, "edit-payload")
        edit.clear()
        edit.send_keys('{"failRate": 0, "note": "fixed"}')
        driver.find_element(By.ID, "edit-send").click()
        done = await wait_for_job(client, server, failed, lambda job: job["status"] == "completed")
        assert done["payload"] == {"failRate": 0, "note": "fixed"}

        # Pause and resume a template.
        driver.get(f"{server.url}/ui/jobs/{template}")
        click(driver, "pause")
        await wait_for_job(client, server, template, lambda job: job["status"] == "paused")
        click(driver, "resume")
        await wait_for_job(client, server, template, lambda job: job["status"] == "pending")
        assert await status_of(template) == "pending"


async def test_bulk_retry_of_a_filtered_set_of_200_jobs_after_a_confirmation(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    batch = {"jobs": [job_body(scheduledAt=FUTURE) for _ in range(200)]}
    created = await client.post(f"{server.url}/jobs/batch", json=batch)
    assert created.status_code == 200, created.text
    cancelled = await client.post(
        f"{server.url}/jobs/cancel", json={"filter": {"tenantId": TENANT, "status": "pending"}}
    )
    assert cancelled.json()["changed"] == 200
    # One job that matches nothing: it must not be touched.
    bystander = await create(client, server, job_body(scheduledAt=FUTURE))

    async def by_status() -> dict[str, int]:
        stats = await client.get(f"{server.url}/stats", params={"tenantId": TENANT})
        counts: dict[str, int] = stats.json()["byStatus"]
        return counts

    assert await by_status() == {"cancelled": 200, "pending": 1}
    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/jobs?tenantId={TENANT}&status=cancelled")
        button = driver.find_element(By.CSS_SELECTOR, 'button[data-bulk="retry"]')
        assert button.is_displayed()
        assert not driver.find_element(By.CSS_SELECTOR, 'button[data-bulk="cancel"]').is_displayed()
        button.click()
        alert = wait_until(driver, alert_is_present(), "the confirmation")
        assert alert.text == f"Retry all 200 cancelled jobs of tenant {TENANT}?"
        alert.accept()
        wait_until(
            driver,
            lambda d: (
                d.find_element(By.ID, "bulk-result").text == "200 of 200 matching jobs changed."
            ),
            "the bulk result",
        )
    counts = await by_status()
    assert "cancelled" not in counts
    assert sum(counts.values()) == 201
    assert (await client.get(f"{server.url}/jobs/{bystander}")).json()["status"] == "pending"


async def test_a_writer_key_signs_in_sees_its_tenants_job_and_may_act(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
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
        driver.find_element(By.CSS_SELECTOR, 'button[data-action="cancel"]').click()
        await wait_for_job(client, server, waiting, lambda job: job["status"] == "cancelled")
    # The other tenant's job was never shown, nor touched.
    assert (await client.get(f"{server.url}/jobs/{other}")).json()["status"] == "pending"


async def test_a_reader_key_sees_no_actions_and_a_forged_write_with_its_cookie_is_refused(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
) -> None:
    server = await dev_factory()
    reader = await server.create_key(client, TENANT, "reader")
    waiting = await create(client, server, job_body(scheduledAt=FUTURE))
    with chromium() as driver:
        sign_in(driver, server, reader)
        driver.get(f"{server.url}/ui/jobs/{waiting}")
        wait_until(
            driver, lambda d: d.find_element(By.ID, "job-status").text == "pending", "the detail"
        )
        assert visible_actions(driver) == []
        assert driver.find_elements(By.CSS_SELECTOR, "button[data-action]") == []
        cookie = driver.get_cookie(SESSION_COOKIE)
        assert cookie is not None
        assert cookie["httpOnly"]
        # A forged write from the page itself (the browser sends the cookie): refused.
        status = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"fetch('/jobs/{waiting}/cancel', {{method: 'POST'}}).then(r => done(r.status));"
        )
        assert status == 403
    # The same forged POST with the cookie, without and with the session's CSRF token: the
    # first fails the CSRF check, the second the reader's role; both are 403.
    session = {"Cookie": f"{SESSION_COOKIE}={cookie['value']}"}
    async with httpx.AsyncClient(timeout=10.0) as anonymous:
        for headers in (session, {**session, CSRF_HEADER: csrf_token(reader)}):
            forged = await anonymous.post(f"{server.url}/jobs/{waiting}/cancel", headers=headers)
            assert forged.status_code == 403, forged.text
        # The cookie does read: it is a real session of the reader's key.
        read = await anonymous.get(f"{server.url}/jobs/{waiting}", headers=session)
        assert read.status_code == 200
    stored = (await client.get(f"{server.url}/jobs/{waiting}")).json()
    assert stored["status"] == "pending"
    assert stored.get("cancelRequestedAt") is None
