"""``jobscheduler seed``: insert a realistic mix of demo jobs straight into the job store.

The mix exercises every code path: immediate and future one-offs, ``flaky`` jobs whose
retries end up in the DLQ, ``slow`` jobs, ``log-message`` jobs and a few cron templates,
spread over three tenants with varied priorities. Each job is built through the same
validation as ``POST /jobs`` (:func:`jobscheduler.domain.validation.parse_create_request`), so the
store only ever holds jobs the API would have accepted.

Idempotency keys carry a run id (``seed-<run id>-...``), so seeding twice adds a second
batch instead of failing; ``--random-seed`` makes the mix itself reproducible.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import secrets
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import trio

from jobscheduler._argtypes import integer
from jobscheduler._scopes import shielded
from jobscheduler.config import Settings
from jobscheduler.domain.model import Job, format_time
from jobscheduler.domain.validation import parse_create_request
from jobscheduler.errors import DuplicateJob, JobSchedulerError
from jobscheduler.handlers import default_registry
from jobscheduler.store import JobRecords, JobStore

EPILOG = """\
The mix (of --count one-off jobs):
  immediate    40%  noop, due now               -> runs on the next scheduler tick
  future       25%  noop, due 5s to 6h ahead    -> waits as pending
  flaky        15%  flaky, failRate 0.3 to 1.0  -> retries; some end in the DLQ
  slow         10%  slow, sleepMs 50 to 3000    -> long-running handlers
  log-message  10%  log-message                 -> one log line each
plus --cron templates (default 3): */1 * * * *, */5 * * * *, 0 2 * * *, ...
Tenants: tenant-a, tenant-b, tenant-c.

Store: --store mongo uses MONGO_URI/MONGO_DB; --store sqlite uses SQLITE_PATH. Without
--store, mongo is used when MONGO_URI is set, sqlite otherwise.

Examples:
  jobscheduler seed --count 500
  SQLITE_PATH=/tmp/demo.db jobscheduler seed --count 60 --random-seed 7
  docker compose -f docker/docker-compose.yml run --rm seed -count 500
"""

TENANTS = ("tenant-a", "tenant-b", "tenant-c")
TENANT_WEIGHTS = (5, 3, 2)
PRIORITIES = (0, 0, 0, 0, 1, 2, 5, 10, -1)

# Kind -> share of --count. Rounding leftovers go to the first kind.
MIX: dict[str, float] = {
    "immediate": 0.40,
    "future": 0.25,
    "flaky": 0.15,
    "slow": 0.10,
    "log-message": 0.10,
}
KIND_JOB_TYPE: dict[str, str] = {
    "immediate": "noop",
    "future": "noop",
    "flaky": "flaky",
    "slow": "slow",
    "log-message": "log-message",
    "cron": "noop | log-message",
}
CRON_EXPRESSIONS = ("*/1 * * * *", "*/5 * * * *", "0 2 * * *", "*/15 * * * *", "30 * * * *")
MESSAGES = (
    "hello from the scheduler",
    "nightly report run",
    "invoice batch exported",
    "cache warmed",
    "user digest sent",
    "sitemap regenerated",
)
INSERT_CONCURRENCY = 16

_URI_CREDENTIALS = re.compile(r"(?<=://)[^@/]*@")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--count",
        "-count",
        type=_non_negative_int,
        default=100,
        metavar="N",
        help="number of one-off jobs to insert (default: 100)",
    )
    parser.add_argument(
        "--cron",
        "-cron",
        type=_non_negative_int,
        default=3,
        metavar="N",
        help="number of cron templates to insert in addition (default: 3)",
    )
    parser.add_argument(
        "--store",
        "-store",
        choices=("sqlite", "mongo"),
        default=None,
        help="where to write (default: mongo if MONGO_URI is set, else sqlite at SQLITE_PATH)",
    )
    parser.add_argument(
        "--random-seed",
        "-random-seed",
        type=int,
        default=None,
        metavar="INT",
        help="make the mix reproducible (keys still differ per run)",
    )
    parser.add_argument(
        "--run-id",
        "-run-id",
        default=None,
        metavar="ID",
        help="id embedded in every idempotency key (default: timestamp + random suffix)",
    )


def _non_negative_int(text: str) -> int:
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more, got {value}")
    return value


# --------------------------------------------------------------------------- the mix


@attrs.frozen(kw_only=True)
class Planned:
    """One job to insert: its seed kind and the ``POST /jobs`` body that describes it."""

    kind: str
    body: dict[str, Any]


def kind_counts(count: int) -> dict[str, int]:
    """How many of ``count`` one-off jobs each kind gets (exact, sums to ``count``)."""
    counts = {kind: math.floor(count * share) for kind, share in MIX.items()}
    counts["immediate"] += count - sum(counts.values())
    return counts


def plan(
    count: int, cron_templates: int, *, run_id: str, now: datetime, rng: random.Random
) -> list[Planned]:
    """The ``POST /jobs`` bodies of one seed run, in shuffled order."""
    kinds = [kind for kind, n in kind_counts(count).items() for _ in range(n)]
    rng.shuffle(kinds)
    planned: list[Planned] = []
    for index, kind in enumerate(kinds):
        body: dict[str, Any] = {
            "idempotencyKey": f"seed-{run_id}-{index:06d}-{kind}",
            "tenantId": rng.choices(TENANTS, weights=TENANT_WEIGHTS)[0],
            "jobType": KIND_JOB_TYPE[kind],
            "priority": rng.choice(PRIORITIES),
            # Due now: up to a minute in the past, so the next tick claims it.
            "scheduledAt": format_time(now - timedelta(seconds=rng.uniform(0, 60))),
        }
        if kind == "future":
            # Log-uniform between 5 seconds and 6 hours ahead: many soon, a few much later.
            ahead = math.exp(rng.uniform(math.log(5), math.log(6 * 3600)))
            body["scheduledAt"] = format_time(now + timedelta(seconds=ahead))
        elif kind == "flaky":
            body["payload"] = {"failRate": round(rng.uniform(0.3, 1.0), 2)}
            body["maxAttempts"] = rng.choice((2, 3, 3, 4))
        elif kind == "slow":
            body["payload"] = {"sleepMs": rng.randint(50, 3000)}
        elif kind == "log-message":
            body["payload"] = {"message": rng.choice(MESSAGES)}
        planned.append(Planned(kind=kind, body=body))
    for index in range(cron_templates):
        expression = CRON_EXPRESSIONS[index % len(CRON_EXPRESSIONS)]
        body = {
            "idempotencyKey": f"seed-{run_id}-cron-{index:03d}",
            "tenantId": TENANTS[index % len(TENANTS)],
            "cron": expression,
            "priority": rng.choice(PRIORITIES),
        }
        if index % 2:
            body["jobType"] = "noop"
        else:
            body["jobType"] = "log-message"
            body["payload"] = {"message": f"cron {expression}: {rng.choice(MESSAGES)}"}
        planned.append(Planned(kind="cron", body=body))
    return planned


def build_jobs(planned: list[Planned], now: datetime) -> list[tuple[str, Job]]:
    """Validate every body exactly as the API does; a ValidationError here is a seed bug."""
    validators = default_registry().validators()
    return [
        (item.kind, parse_create_request(item.body, now=now, job_types=validators))
        for item in planned
    ]


# --------------------------------------------------------------------------- writing


@attrs.define
class Outcome:
    inserted: list[tuple[str, Job]] = attrs.field(factory=list)
    duplicates: int = 0


async def insert_all(store: JobRecords, jobs: list[tuple[str, Job]]) -> Outcome:
    """Insert ``jobs`` with a few concurrent writers; the first store error stops the run."""
    outcome = Outcome()
    errors: list[JobSchedulerError] = []
    send, receive = trio.open_memory_channel[tuple[str, Job]](len(jobs) or 1)
    for item in jobs:
        send.send_nowait(item)
    send.close()

    async def writer(cancel_scope: trio.CancelScope) -> None:
        async for kind, job in receive:
            try:
                outcome.inserted.append((kind, await store.insert(job)))
            except DuplicateJob:
                outcome.duplicates += 1
            except JobSchedulerError as exc:
                errors.append(exc)
                cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for _ in range(INSERT_CONCURRENCY):
            nursery.start_soon(writer, nursery.cancel_scope)
    if errors:
        raise errors[0]
    return outcome


def store_for(kind: str, settings: Settings) -> tuple[JobStore, str]:
    """The store to write to and a description of it (credentials redacted)."""
    if kind == "mongo":
        from jobscheduler.process.assembly import production_store

        uri = _URI_CREDENTIALS.sub("***@", settings.mongo_uri)
        return production_store(settings), f"mongo {uri} (database {settings.mongo_db})"
    from jobscheduler.store.sqlite import SQLiteJobStore

    return SQLiteJobStore(settings.sqlite_path), f"sqlite {settings.sqlite_path}"


async def seed(store: JobStore, jobs: list[tuple[str, Job]]) -> Outcome:
    """Start ``store``, insert ``jobs``, and close it however that ends."""
    await store.start()
    try:
        return await insert_all(store, jobs)
    finally:
        with shielded(5):
            await store.close()


# --------------------------------------------------------------------------- report


def summary(outcome: Outcome, *, where: str, run_id: str, random_seed: int | None) -> str:
    by_kind = Counter(kind for kind, _ in outcome.inserted)
    by_tenant = Counter(job.tenant_id for _, job in outcome.inserted)
    due_now = sum(1 for kind, _ in outcome.inserted if kind not in ("future", "cron"))
    total = len(outcome.inserted)
    seed_note = f", random seed {random_seed}" if random_seed is not None else ""
    lines = [
        f"Seeded {total} jobs into {where}",
        f"run id {run_id}{seed_note}; idempotency keys start with seed-{run_id}-",
        "",
        f"  {'kind':<13}{'job type':<20}{'jobs':>6}",
    ]
    for kind in (*MIX, "cron"):
        lines.append(f"  {kind:<13}{KIND_JOB_TYPE[kind]:<20}{by_kind.get(kind, 0):>6}")
    lines.append(f"  {'total':<33}{total:>6}")
    lines += ["", f"  {'tenant':<13}{'jobs':>6}"]
    for tenant in TENANTS:
        lines.append(f"  {tenant:<13}{by_tenant.get(tenant, 0):>6}")
    lines.append("")
    lines.append(
        f"{due_now} due now (next scheduler tick), {by_kind.get('future', 0)} scheduled up to "
        f"6h ahead, {by_kind.get('cron', 0)} cron templates."
    )
    if outcome.duplicates:
        lines.append(
            f"warning: {outcome.duplicates} jobs were skipped because their idempotency key "
            "already exists (reused --run-id?)"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    store_kind: str = args.store or ("mongo" if "MONGO_URI" in settings.configured else "sqlite")
    run_id: str = args.run_id or (
        datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(2)
    )
    rng = random.Random(args.random_seed)
    now = datetime.now(UTC)
    jobs = build_jobs(plan(args.count, args.cron, run_id=run_id, now=now, rng=rng), now)
    store, where = store_for(store_kind, settings)
    print(f"seeding {len(jobs)} jobs into {where} ...", file=sys.stderr)
    outcome = trio.run(seed, store, jobs)
    print(summary(outcome, where=where, run_id=run_id, random_seed=args.random_seed))
    return 0
