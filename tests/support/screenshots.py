"""``just screenshots``: pictures of each dashboard view, taken in headless Chromium against a
fresh ``jobscheduler dev`` holding a small realistic mix of jobs, written to ``docs/images/``
(the documentation site's pictures).

Usage: ``python -m tests.support.screenshots [OUT_DIR]`` (default ``docs/images``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import httpx
import trio

from tests.support.browser import DESKTOP, PHONE, chromium, wait_until
from tests.support.dev_server import DevServer
from tests.support.jobs_api import create_job, wait_for_job
from tests.support.workflows_api import create_workflow, ended, wait_for_workflow

#: The tenants of the demo store; the views are shown for all of them, one is filtered on.
TENANTS = ("acme", "globex", "initech")
TENANT = TENANTS[0]


async def seed(http: httpx.AsyncClient, server: DevServer) -> dict[str, str]:
    """A mix of jobs of three tenants in every common state; a few ids worth a picture."""

    async def create(key: str, tenant: str = TENANT, **fields: object) -> str:
        body = {
            "idempotencyKey": key,
            "tenantId": tenant,
            "jobType": "noop",
            "scheduledAt": "2020-01-01T00:00:00Z",
            **fields,
        }
        if "cron" in fields:
            del body["scheduledAt"]
        job_id: str = (await create_job(http, server, body))["id"]
        return job_id

    ids: dict[str, str] = {}
    for n in range(12):
        await create(f"welcome-email-{n}", TENANTS[n % 3], payload={"user": n})
    for n in range(5):
        await create(
            f"report-{n}",
            jobType="slow",
            payload={"sleepMs": 0},
            scheduledAt="2099-01-01T09:00:00Z",
        )
    ids["dlq"] = await create(
        "charge-card-1042", jobType="flaky", payload={"failRate": 1, "order": 1042}, maxAttempts=2
    )
    ids["result"] = await create("thumbnail-77", "globex", jobType="slow", payload={"sleepMs": 5})
    for n in range(3):
        await create(
            f"webhook-{n}", TENANTS[n], jobType="http",
            payload={"url": "http://169.254.169.254/"}, maxAttempts=1,
        )  # fmt: skip
    await create(
        "weekday-digest", "globex", payload={"list": "ops"}, cron="0 9 * * 1-5",
        timezone="Europe/Paris",
    )  # fmt: skip
    ids["cron"] = await create(
        "nightly-cleanup", payload={"older_than_days": 30}, cron="0 3 * * *",
        timezone="Europe/Paris",
    )  # fmt: skip
    await create("hourly-sync", "initech", cron="15 * * * *")
    await http.post(f"{server.url}/jobs/{ids['cron']}/trigger")
    ids["workflow"] = await seed_workflow(http, server)
    await wait_for_job(http, server, ids["dlq"], lambda job: job["status"] == "dlq", 60)
    await wait_for_job(http, server, ids["result"], lambda job: job["status"] == "completed")
    return ids


#: A nightly ETL: export, three transforms in parallel, a load after all of them; an audit
#: that fails, so the archive after it is cancelled while the clean-up runs anyway.
WORKFLOW_STEPS = [
    {"name": "export", "jobType": "slow", "payload": {"sleepMs": 50}},
    *(
        {"name": f"transform-{part}", "jobType": "slow", "payload": {"sleepMs": 50},
         "dependsOn": ["export"]}
        for part in ("orders", "customers", "invoices")
    ),
    {"name": "load", "jobType": "noop",
     "dependsOn": ["transform-orders", "transform-customers", "transform-invoices"]},
    {"name": "audit", "jobType": "flaky", "payload": {"failRate": 1}, "maxAttempts": 1,
     "dependsOn": ["export"]},
    {"name": "archive", "jobType": "noop", "dependsOn": ["audit", "load"]},
    {"name": "clean-up", "jobType": "noop", "dependsOn": ["archive"],
     "onParentFailure": "run"},
]  # fmt: skip


async def seed_workflow(http: httpx.AsyncClient, server: DevServer) -> str:
    """The nightly ETL workflow, run to its end; its id."""
    body = {"tenantId": TENANT, "idempotencyKey": "etl-2026-12-01", "steps": WORKFLOW_STEPS}
    workflow_id: str = (await create_workflow(http, server, body))["id"]
    await wait_for_workflow(http, server, workflow_id, ended, 60)
    return workflow_id


async def main(out_dir: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = DevServer(Path(tmp), {"LOG_LEVEL": "INFO", "AUTH": "off"})
        await server.start()
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                ids = await seed(http, server)
            # The views as an operator opens them (AUTH=off): every tenant at once; the
            # filtered Jobs view narrowed to one.
            shots = [
                ("dashboard-overview.png", "/ui", DESKTOP, "#ov-executors tbody tr[data-worker]"),
                ("dashboard-jobs.png", "/ui/jobs", DESKTOP, "#jobs tbody tr"),
                ("dashboard-job-dlq.png", f"/ui/jobs/{ids['dlq']}", DESKTOP, "#attempts li"),
                ("dashboard-job-cron.png", f"/ui/jobs/{ids['cron']}", DESKTOP, "#fires li"),
                ("dashboard-dead-letters.png", "/ui/dead-letters", DESKTOP, "#dlq tbody tr"),
                ("dashboard-cron.png", "/ui/cron", DESKTOP, "#templates td.last-run a"),
                (
                    "dashboard-workflow.png",
                    f"/ui/workflows/{ids['workflow']}",
                    DESKTOP,
                    "#dag a.step",
                ),
                ("dashboard-workflows.png", "/ui/workflows", DESKTOP, "#workflows tbody tr"),
                (
                    "dashboard-jobs-filtered.png",
                    f"/ui/jobs?tenantId={TENANT}&status=pending&status=completed&key=report-"
                    "&sort=scheduledAt&limit=25",
                    DESKTOP,
                    "#jobs tbody tr",
                ),
                (
                    "dashboard-template-edit.png",
                    f"/ui/jobs/{ids['cron']}#edit-template",
                    DESKTOP,
                    "#ledger tbody tr",
                ),
                ("dashboard-jobs-phone.png", "/ui/jobs", PHONE, "#jobs tbody tr"),
            ]
            for name, path, size, ready in shots:
                with chromium(size) as driver:
                    driver.get(server.url + path)
                    wait_until(
                        driver,
                        lambda d, css=ready: d.execute_script(
                            f"return document.querySelector({css!r}) !== null"
                        ),
                        f"{name} to show its data",
                    )
                    if size != PHONE:
                        # The whole page, not only the first screenful.
                        height = driver.execute_script(
                            "return document.documentElement.scrollHeight"
                        )
                        driver.set_window_size(size[0], max(size[1], height + 100))
                    driver.save_screenshot(str(out_dir / name))
                print(f"wrote {out_dir / name}")
        finally:
            await server.stop()


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
    target.mkdir(parents=True, exist_ok=True)
    trio.run(main, target)
