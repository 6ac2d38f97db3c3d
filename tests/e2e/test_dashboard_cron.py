"""Cron templates in a real browser (headless Chromium) against a live ``jobscheduler dev``
with ``AUTH=required``, signed in with the admin key: a template's page (its next fire times
and its schedule in words, pause and resume, the edit form, its ledger, and the same ledger
from the CLI) and the Cron view's list with its row actions (pause, resume, trigger, delete).

Every test checks what the page shows, and what its buttons did, against what the API says
the store holds, not only the page's own words. The repeated steps are in dashboard_steps.
"""

from __future__ import annotations

import json
import sys

import httpx
import pytest
import trio
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import chromium, wait_until

from .conftest import readme_env, wait_for_job
from .dashboard_steps import (
    FUTURE,
    TENANT,
    DevFactory,
    JobBody,
    answer_confirmation,
    click_action,
    create,
    create_template,
    element,
    listed,
    rows,
    shown,
    sign_in,
    stored,
    text_of,
    visible_actions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


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
        # Each in UTC and in the template's zone, as the API computed them.
        assert fires(driver) == [
            f"{shown(fire['at'])} · {shown(fire['at'], 'Europe/Paris')}"
            for fire in nxt["fireTimes"]
        ]
        assert [shown(f["local"], "Europe/Paris") for f in nxt["fireTimes"]] == [
            shown(f["at"], "Europe/Paris") for f in nxt["fireTimes"]
        ]
        assert text_of(driver, "cron-words") == "At 09:00, Monday through Friday, Europe/Paris"
        assert rows(driver, "ledger")[0]["cells"] == "No fire time yet."

        click_action(driver, "pause")
        await wait_for_job(client, server, template, lambda job: job["status"] == "paused")
        click_action(driver, "resume")
        await wait_for_job(client, server, template, lambda job: job["status"] == "pending")

        # Edit: an expression that never fires is refused saying which field and why.
        driver.find_element(By.CSS_SELECTOR, "#edit-template summary").click()
        cron = driver.find_element(By.ID, "t-cron")
        cron.clear()
        cron.send_keys("0 0 31 2 *")
        driver.find_element(By.ID, "template-save").click()
        wait_until(
            driver,
            lambda d: text_of(d, "template-error") == "cron: day 31 never occurs in February",
            "the cron error",
        )
        assert cron.get_attribute("aria-invalid") == "true"
        # A bad time zone is refused with the reason beside the form; then a good edit.
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


async def test_cron_view_lists_templates_in_words_and_acts_on_them_from_the_list(
    dev_factory: DevFactory, client: httpx.AsyncClient, job_body: JobBody
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    template = await create_template(client, server, job_body(cron="*/15 * * * *"))
    paris = await create_template(
        client,
        server,
        job_body(
            idempotencyKey="a-rather-long-template-key-for-the-weekday-digest-of-operations",
            cron="0 9 * * 1-5",
            timezone="Europe/Paris",
        ),
    )
    one_off = await create(client, server, job_body(scheduledAt=FUTURE))
    job = await stored(client, server, template)
    digest = await stored(client, server, paris)

    def row(driver: WebDriver, job_id: str = template) -> dict[str, str]:
        [found] = [r for r in rows(driver, "templates", "jobId", "status") if r["jobId"] == job_id]
        return found

    scope = f'#templates tr[data-job-id="{template}"]'
    with chromium() as driver:
        sign_in(driver, server)
        driver.get(f"{server.url}/ui/cron?tenantId={TENANT}")
        wait_until(driver, lambda d: len(rows(d, "templates")) == 2, "the templates listed")
        assert {r["jobId"] for r in rows(driver, "templates", "jobId")} == {template, paris}
        assert one_off not in {r["jobId"] for r in rows(driver, "templates", "jobId")}
        cells = row(driver)["cells"].split(" | ")
        assert cells[1:5] == [
            "Every 15 minutes, UTC */15 * * * *",
            "pending",
            shown(job["scheduledAt"]),
            "none yet",
        ]
        # The next fire in UTC and in the template's own zone, beside each other.
        assert row(driver, paris)["cells"].split(" | ")[3] == (
            f"{shown(digest['scheduledAt'])} {shown(digest['scheduledAt'], 'Europe/Paris')}"
        )
        # A 1280 px screen shows every column: nothing scrolls sideways.
        assert driver.execute_script(
            "const wrap = document.querySelector('.table-wrap');"
            "return document.documentElement.scrollWidth <= innerWidth"
            " && wrap.scrollWidth <= wrap.clientWidth"
        )
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
        # The run's outcome is the template's last run, linked to the run's page.
        run = await wait_for_job(
            client, server, runs[0]["id"], lambda j: j["status"] == "completed"
        )
        wait_until(
            driver,
            lambda d: row(d)["cells"].split(" | ")[4] == f"completed {shown(run['updatedAt'])}",
            "the last run's outcome",
        )
        link = element(driver, f"{scope} td.last-run a", "href")
        assert link["href"] == f"/ui/jobs/{run['id']}"

        click_action(driver, "delete", scope)
        assert answer_confirmation(driver) == "Delete this template? Its past runs stay."
        await wait_for_job(client, server, template, lambda j: j["status"] == "cancelled")
        wait_until(driver, lambda d: row(d)["status"] == "cancelled", "retired in the list")
        assert visible_actions(driver, scope) == []
