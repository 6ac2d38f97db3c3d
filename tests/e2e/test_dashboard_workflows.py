"""Workflows in a real browser (headless Chromium) against a live ``jobscheduler dev``: the
Workflows view lists them; a workflow's page draws its DAG (inline SVG: a node per step, an
edge per dependency) with each step's status, refreshes it live as the steps run, clicks
through to a step's job (whose page links back); its Cancel button cancels every unfinished
step. With ``AUTH=off`` the operator sees every tenant's workflows; a tenant's key sees only
its own, and another tenant's workflow is a missing one.

What the pages show is checked against what ``GET /workflows[/{id}]`` says the store holds.
The repeated steps are in dashboard_steps.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import chromium, wait_until
from tests.support.dev_server import DevServer
from tests.support.workflows_api import create_workflow, ended, wait_for_workflow

from .dashboard_steps import (
    FUTURE,
    TENANT,
    DevFactory,
    answer_confirmation,
    click,
    click_action,
    refreshes,
    rows,
    sign_in,
    text_of,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

#: export, then three transforms side by side, then a load after all three.
ETL = [
    # Long enough for the page to draw it running (the test checks it was).
    {"name": "export", "jobType": "slow", "payload": {"sleepMs": 8000}},
    *(
        {"name": f"transform-{n}", "jobType": "noop", "dependsOn": ["export"]}
        for n in ("a", "b", "c")
    ),
    {"name": "load", "jobType": "noop", "dependsOn": ["transform-a", "transform-b", "transform-c"]},
]


def body(key: str, steps: list[dict[str, Any]], tenant: str = TENANT) -> dict[str, Any]:
    return {"tenantId": tenant, "idempotencyKey": key, "steps": steps}


def nodes(driver: WebDriver) -> dict[str, dict[str, str]]:
    """The DAG's step nodes by name: each one's status, layer and link."""
    found: dict[str, dict[str, str]] = driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#dag a.step')].map(a => ["
        "  a.dataset.step,"
        "  {status: a.dataset.status, layer: a.dataset.layer, href: a.getAttribute('href')}]))"
    )
    return found


def edges(driver: WebDriver) -> set[tuple[str, str]]:
    """The DAG's edges, (parent, child)."""
    found: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll('#dag path.edge')]"
        ".map(p => [p.dataset.from, p.dataset.to])"
    )
    return {(a, b) for a, b in found}


def statuses(workflow: dict[str, Any]) -> dict[str, str]:
    return {step["name"]: step["status"] for step in workflow["steps"]}


async def read(http: httpx.AsyncClient, server: DevServer, workflow_id: str) -> dict[str, Any]:
    reply = await http.get(f"{server.url}/workflows/{workflow_id}")
    assert reply.status_code == 200, reply.text
    stored: dict[str, Any] = reply.json()
    return stored


async def test_with_auth_off_the_dag_is_drawn_refreshes_live_and_clicks_through_to_a_step(
    dev_factory: DevFactory, client: httpx.AsyncClient
) -> None:
    server = await dev_factory(AUTH="off", UI_REFRESH="1s")
    other = await create_workflow(
        client, server, body("other-tenant", [{"name": "only", "jobType": "noop"}], "globex")
    )

    with chromium() as driver:
        # The list: every tenant's workflows (AUTH=off), each a link to its page; one
        # created while it is open appears with the next refresh.
        driver.get(f"{server.url}/ui/workflows")
        wait_until(driver, lambda d: len(rows(d, "workflows", "workflowId")) == 1, "one row")
        created = await create_workflow(client, server, body("etl-live", ETL))
        ids = {step["name"]: step["jobId"] for step in created["steps"]}
        wait_until(driver, lambda d: len(rows(d, "workflows", "workflowId")) == 2, "two rows")
        listed = {r["workflowId"]: r["cells"] for r in rows(driver, "workflows", "workflowId")}
        assert listed.keys() == {created["id"], other["id"]}
        assert listed[created["id"]].startswith(f"{TENANT} | etl-live | ")
        assert listed[other["id"]].startswith("globex | other-tenant | ")
        click(driver, f'#workflows tr[data-workflow-id="{created["id"]}"] td.workflow-key a')
        wait_until(driver, lambda d: d.current_url.endswith(created["id"]), "the workflow page")

        # Drawn while export runs: a node per step, in layers, an edge per dependency.
        wait_until(driver, lambda d: len(nodes(d)) == 5, "the DAG's five nodes")
        drawn = nodes(driver)
        assert {name: n["layer"] for name, n in drawn.items()} == {
            "export": "0", "transform-a": "1", "transform-b": "1", "transform-c": "1",
            "load": "2",
        }  # fmt: skip
        assert {name: n["href"] for name, n in drawn.items()} == {
            name: f"/ui/jobs/{job_id}" for name, job_id in ids.items()
        }
        assert edges(driver) == {("export", f"transform-{n}") for n in "abc"} | {
            (f"transform-{n}", "load") for n in "abc"
        }
        assert drawn["export"]["status"] in ("pending", "queued", "claimed", "running")
        assert drawn["load"]["status"] == "waiting"
        before = refreshes(driver)

        # Live: the page follows the steps to the end without a reload.
        final = await wait_for_workflow(client, server, created["id"], ended)
        assert final["status"] == "completed"
        wait_until(
            driver,
            lambda d: {n: s["status"] for n, s in nodes(d).items()} == statuses(final),
            "every node completed",
        )
        assert refreshes(driver) > before
        assert text_of(driver, "wf-counts") == "5 completed"
        step_rows = {r["step"]: r["status"] for r in rows(driver, "steps", "step", "status")}
        assert step_rows == statuses(final)

        # A node is a link to its job, whose page links back to the workflow.
        click(driver, '#dag a.step[data-step="load"]')
        wait_until(driver, lambda d: d.current_url.endswith(ids["load"]), "the job page")
        wait_until(
            driver,
            lambda d: (
                d.execute_script(
                    "return document.querySelector('[data-field=workflowId]')?.textContent"
                )
                == f"{created['id']} (step load)"
            ),
            "the link back to the workflow",
        )


async def test_a_tenant_key_sees_only_its_workflows_and_may_cancel_one(
    dev_factory: DevFactory, client: httpx.AsyncClient
) -> None:
    server = await dev_factory(UI_REFRESH="1s")
    writer = await server.create_key(client, TENANT, "writer")
    # Its first step is due far ahead: the workflow stays running until cancelled.
    waiting = [
        {"name": "later", "jobType": "noop", "scheduledAt": FUTURE},
        {"name": "after", "jobType": "noop", "dependsOn": ["later"]},
    ]
    mine = await create_workflow(client, server, body("mine", waiting))
    theirs = await create_workflow(client, server, body("theirs", waiting, "globex"))

    with chromium() as driver:
        sign_in(driver, server, writer)
        driver.get(f"{server.url}/ui/workflows?tenantId=globex")
        wait_until(driver, lambda d: len(rows(d, "workflows", "workflowId")) == 1, "one row")
        [row] = rows(driver, "workflows", "workflowId", "status")
        # The key's tenant, whatever the query names; no Tenant column.
        assert row == {"workflowId": mine["id"], "status": "running", "cells": row["cells"]}
        assert row["cells"].startswith("mine | running | 2 | ")

        # Another tenant's workflow is a missing one.
        driver.get(f"{server.url}/ui/workflows/{theirs['id']}")
        wait_until(
            driver,
            lambda d: text_of(d, "wf-error") == "No such workflow.",
            "the missing workflow",
        )
        assert nodes(driver) == {}

        # Its own: Cancel asks first, then cancels every unfinished step.
        driver.get(f"{server.url}/ui/workflows/{mine['id']}")
        wait_until(driver, lambda d: len(nodes(d)) == 2, "the DAG")
        assert {n: s["status"] for n, s in nodes(driver).items()} == {
            "later": "pending",
            "after": "waiting",
        }
        click_action(driver, "cancel", "#wf-actions")
        assert answer_confirmation(driver) == "Cancel every unfinished step of this workflow?"
        cancelled = await wait_for_workflow(client, server, mine["id"], ended)
        assert cancelled["status"] == "cancelled"
        assert set(statuses(cancelled).values()) == {"cancelled"}
        wait_until(
            driver,
            lambda d: {n: s["status"] for n, s in nodes(d).items()} == statuses(cancelled),
            "the cancelled steps drawn",
        )
        assert text_of(driver, "wf-result") == "Done: the workflow is cancelled."
    # The other tenant's workflow was never touched.
    assert (await read(client, server, theirs["id"]))["status"] == "running"
