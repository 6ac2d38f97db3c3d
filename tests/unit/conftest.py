"""Shared fixtures and helpers of the unit tests.

Roles and the API are built on the in-memory store (``store``: it passes the same contract
suite as SQLite and MongoDB), the in-process bus and the always-leader elector, with a clock
that follows trio's clock, so a test that asks for ``autojump_clock`` (pytest-trio's
``MockClock(autojump_threshold=0)``) runs in virtual time.

Nothing of that does real I/O: every store call is a trio checkpoint, so virtual time moves
only when every task waits for a deadline -- a sleep, a heartbeat, a timeout -- and then
straight to the next one. A role loop, the executor with its shielded outcome writes, or a
timeout under test all run in virtual time, exactly, however loaded the machine is.

Real time is for what does run outside trio: worker processes and thread handlers that
finish on their own (bounded by ``trio.fail_after``), and the tests of SQLite itself, which
take ``sqlite_store`` (its calls run in threads, and virtual time would leap while they
work). One thread is left in a role: ``run_executor`` shuts its worker-process pool down in
a thread as it exits, so a test bounds its wait for the role, not the role's exit.

Assertions are about outcomes and ordering; exact times only where nothing else runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from jobscheduler.bus.local import LocalBus
from jobscheduler.clock import Clock, TrioClock
from jobscheduler.config import Settings
from jobscheduler.domain.attempts import Attempt
from jobscheduler.domain.audit import AuditQuery, AuditRecord
from jobscheduler.domain.cron import Occurrence, OccurrenceStatus
from jobscheduler.domain.flow import FlowReport, LimitOverride, TenantWeight
from jobscheduler.domain.keys import ApiKey
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.notifications import Delivery, Event, Webhook
from jobscheduler.domain.overview import OverviewStats
from jobscheduler.domain.retention import Override, PruneSummary
from jobscheduler.domain.states import Change, WorkflowChange
from jobscheduler.domain.workers import WorkerBeat
from jobscheduler.domain.workflows import Workflow
from jobscheduler.election import Elector
from jobscheduler.election.local import LocalElector
from jobscheduler.handlers import HandlerRegistry, default_registry
from jobscheduler.observability.metrics import Metrics
from jobscheduler.roles.deps import Deps, Waker
from jobscheduler.store import JobStore
from jobscheduler.store.base import InsertOutcome
from jobscheduler.store.memory import MemoryJobStore
from jobscheduler.store.query import (
    CountKey,
    Cursor,
    Exclusions,
    JobCounts,
    JobQuery,
    JobStats,
    Pick,
    Statuses,
)
from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.store.workflows import WorkflowQuery
from jobscheduler.testing import JobFactory

if TYPE_CHECKING:
    from .api_support import Api

#: Wall time at trio time zero of every test that builds a clock with :func:`make_clock`.
BASE = datetime(2026, 1, 1, tzinfo=UTC)


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Test settings: short, explicit values; anything can be overridden."""
    values: dict[str, Any] = {
        "sqlite_path": str(tmp_path / "jobs.db"),
        "worker_id": "worker-test",
        "scheduler_tick": 0.5,
        "claim_batch": 20,
        "queued_timeout": 30.0,
        "claim_timeout": 300.0,
        "reaper_interval": 30.0,
        "heartbeat_interval": 10.0,
        "executor_concurrency": 8,
        "shutdown_grace": 5.0,
    }
    values.update(overrides)
    return Settings(**values)


#: Jobs as the store would hold them (defaults: a pending noop due at BASE).
make_job = JobFactory(at=BASE)


def sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    """A metric's current value (0.0 when the labelled child was never touched)."""
    value = metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


class ProxyStore(JobStore):
    """A JobStore that forwards every call to ``inner``; tests override single methods to
    inject failures or observe calls."""

    def __init__(self, inner: JobStore) -> None:
        self.inner = inner

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def ping(self) -> None:
        await self.inner.ping()

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        return await self.inner.insert(job, audit=audit)

    async def insert_many(self, jobs: Sequence[Job]) -> list[InsertOutcome]:
        return await self.inner.insert_many(jobs)

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        return await self.inner.get(job_id, tenant=tenant)

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        return await self.inner.claim_due(now, limit)

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        return await self.inner.due_templates(now, limit)

    async def next_due_at(self) -> datetime | None:
        return await self.inner.next_due_at()

    async def apply(self, change: Change) -> Job | None:
        return await self.inner.apply(change)

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        return await self.inner.apply_many(changes)

    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        return await self.inner.find_stale(statuses, field, before, limit)

    async def count_jobs(
        self, tenant_id: str | None, statuses: Statuses = None, *, by_type: bool = False
    ) -> JobCounts:
        return await self.inner.count_jobs(tenant_id, statuses, by_type=by_type)

    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        return await self.inner.record_occurrences(records)

    async def occurrences(
        self,
        template_id: str,
        *,
        limit: int,
        before: datetime | None = None,
        statuses: Sequence[OccurrenceStatus] | None = None,
        tenant: str | None = None,
    ) -> list[Occurrence]:
        return await self.inner.occurrences(
            template_id, limit=limit, before=before, statuses=statuses, tenant=tenant
        )

    async def prune_occurrences(self, before: datetime) -> int:
        return await self.inner.prune_occurrences(before)

    async def buffered_templates(self, limit: int) -> list[Job]:
        return await self.inner.buffered_templates(limit)

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        return await self.inner.find_jobs(query, limit, after)

    async def apply_bulk(self, changes: Sequence[Change]) -> int:
        return await self.inner.apply_bulk(changes)

    async def stats(self, tenant_id: str | None, now: datetime) -> JobStats:
        return await self.inner.stats(tenant_id, now)

    async def attempts(self, job_id: str, *, tenant: str | None = None) -> list[Attempt]:
        return await self.inner.attempts(job_id, tenant=tenant)

    async def record_attempts(self, records: Sequence[Attempt]) -> None:
        await self.inner.record_attempts(records)

    async def prune_attempts(self, before: datetime) -> int:
        return await self.inner.prune_attempts(before)

    async def find_run(
        self, template_id: str, fire_at: datetime, *, tenant: str | None = None
    ) -> Job | None:
        return await self.inner.find_run(template_id, fire_at, tenant=tenant)

    async def tenants(self, limit: int) -> list[str]:
        return await self.inner.tenants(limit)

    async def insert_workflow(self, workflow: Workflow) -> Workflow:
        return await self.inner.insert_workflow(workflow)

    async def get_workflow(
        self, workflow_id: str, *, tenant: str | None = None, steps: bool = True
    ) -> Workflow:
        return await self.inner.get_workflow(workflow_id, tenant=tenant, steps=steps)

    async def find_workflows(
        self, query: WorkflowQuery, limit: int, after: Cursor | None = None
    ) -> list[Workflow]:
        return await self.inner.find_workflows(query, limit, after)

    async def apply_workflow(self, change: WorkflowChange) -> Workflow | None:
        return await self.inner.apply_workflow(change)

    async def workflow_steps(self, workflow_id: str, *, tenant: str | None = None) -> list[Job]:
        return await self.inner.workflow_steps(workflow_id, tenant=tenant)

    async def any_job(self, query: JobQuery) -> bool:
        return await self.inner.any_job(query)

    async def steps_to_settle(self, before: datetime, limit: int) -> list[Job]:
        return await self.inner.steps_to_settle(before, limit)

    async def insert_key(self, key: ApiKey) -> ApiKey:
        return await self.inner.insert_key(key)

    async def get_key(self, key_id: str, *, tenant: str | None = None) -> ApiKey | None:
        return await self.inner.get_key(key_id, tenant=tenant)

    async def list_keys(self, tenant_id: str | None) -> list[ApiKey]:
        return await self.inner.list_keys(tenant_id)

    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey | None:
        return await self.inner.revoke_key(key_id, now)

    async def append_audit(self, record: AuditRecord) -> None:
        await self.inner.append_audit(record)

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        return await self.inner.list_audit(query)

    async def prune_audit(self, before: datetime, limit: int) -> int:
        return await self.inner.prune_audit(before, limit)

    async def beat_worker(self, beat: WorkerBeat) -> None:
        await self.inner.beat_worker(beat)

    async def live_workers(self, now: datetime) -> list[WorkerBeat]:
        return await self.inner.live_workers(now)

    async def forget_worker(self, worker_id: str) -> None:
        await self.inner.forget_worker(worker_id)

    async def prune_workers(self, now: datetime) -> int:
        return await self.inner.prune_workers(now)

    async def overview_stats(self, tenant_id: str | None, now: datetime) -> OverviewStats:
        return await self.inner.overview_stats(tenant_id, now)

    async def fair_candidates(
        self, now: datetime, per_group: int, exclude: Exclusions | None = None
    ) -> list[Job]:
        return await self.inner.fair_candidates(now, per_group, exclude)

    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        return await self.inner.claim_picks(now, picks)

    async def queued_by_type(self) -> dict[str, int]:
        return await self.inner.queued_by_type()

    async def held_slots(self) -> list[str]:
        return await self.inner.held_slots()

    async def buckets(self, scopes: Sequence[str]) -> dict[str, datetime]:
        return await self.inner.buckets(scopes)

    async def put_bucket(self, scope: str, expect: datetime | None, tat: datetime) -> bool:
        return await self.inner.put_bucket(scope, expect, tat)

    async def limit_overrides(self, tenant_id: str | None = None) -> list[LimitOverride]:
        return await self.inner.limit_overrides(tenant_id)

    async def put_limit_override(self, override: LimitOverride) -> None:
        await self.inner.put_limit_override(override)

    async def tenant_weights(self) -> list[TenantWeight]:
        return await self.inner.tenant_weights()

    async def put_tenant_weight(self, weight: TenantWeight) -> None:
        await self.inner.put_tenant_weight(weight)

    async def put_flow_report(self, report: FlowReport) -> None:
        await self.inner.put_flow_report(report)

    async def flow_report(self) -> FlowReport | None:
        return await self.inner.flow_report()

    async def job_counters(self, statuses: Statuses = None) -> dict[CountKey, int]:
        return await self.inner.job_counters(statuses)

    async def reconcile_counts(self) -> dict[CountKey, tuple[int, int]]:
        return await self.inner.reconcile_counts()

    async def expired_jobs(self, key: CountKey, before: datetime, limit: int) -> list[Job]:
        return await self.inner.expired_jobs(key, before, limit)

    async def delete_jobs(self, jobs: Sequence[Job]) -> int:
        return await self.inner.delete_jobs(jobs)

    async def prune_expired(self, key: CountKey, before: datetime, limit: int) -> int:
        return await self.inner.prune_expired(key, before, limit)

    async def set_retention(self, override: Override) -> None:
        await self.inner.set_retention(override)

    async def retention_overrides(self) -> list[Override]:
        return await self.inner.retention_overrides()

    async def record_prune(self, summary: PruneSummary) -> None:
        await self.inner.record_prune(summary)

    async def last_prune(self) -> PruneSummary | None:
        return await self.inner.last_prune()

    async def reclaim_space(self, max_pages: int) -> int:
        return await self.inner.reclaim_space(max_pages)

    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        return await self.inner.insert_webhook(webhook)

    async def list_webhooks(self, tenant_id: str | None) -> list[Webhook]:
        return await self.inner.list_webhooks(tenant_id)

    async def get_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        return await self.inner.get_webhook(webhook_id, tenant=tenant)

    async def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        return await self.inner.delete_webhook(webhook_id, tenant=tenant)

    async def record_events(self, events: Sequence[Event]) -> None:
        await self.inner.record_events(events)

    async def pending_events(self, limit: int) -> list[Event]:
        return await self.inner.pending_events(limit)

    async def dispatch_event(self, event_id: str, deliveries: Sequence[Delivery]) -> None:
        await self.inner.dispatch_event(event_id, deliveries)

    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        return await self.inner.claim_deliveries(now, lease_until, limit)

    async def settle_delivery(self, claimed: Delivery, after: Delivery) -> Delivery | None:
        return await self.inner.settle_delivery(claimed, after)

    async def list_deliveries(
        self, webhook_id: str, *, limit: int, tenant: str | None = None
    ) -> list[Delivery]:
        return await self.inner.list_deliveries(webhook_id, limit=limit, tenant=tenant)

    async def prune_notifications(self, before: datetime) -> int:
        return await self.inner.prune_notifications(before)


@attrs.define(kw_only=True)
class DepsFactory:
    """Builds Deps around the test's store; every port can be swapped per call."""

    settings: Settings
    store: JobStore

    def __call__(
        self,
        *,
        store: JobStore | None = None,
        bus: LocalBus | None = None,
        registry: HandlerRegistry | None = None,
        settings: Settings | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        waker: bool = True,
        elector: Elector | None = None,
    ) -> Deps:
        clock = clock or make_clock()
        return Deps(
            settings=settings or self.settings,
            store=store or self.store,
            bus=bus if bus is not None else LocalBus(),
            elector=elector or LocalElector("leader-test"),
            registry=registry or default_registry(),
            metrics=metrics or Metrics(),
            clock=clock,
            waker=Waker(clock) if waker else None,
        )


def make_clock() -> TrioClock:
    """Wall time = BASE + trio time elapsed since now (call inside trio)."""
    return TrioClock(base=BASE)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
async def store() -> AsyncIterator[MemoryJobStore]:
    """A started in-memory store, closed after the test: the store of the unit tests (it
    passes the same contract suite as SQLite and MongoDB, and needs no thread)."""
    memory_store = MemoryJobStore()
    await memory_store.start()
    try:
        yield memory_store
    finally:
        await memory_store.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteJobStore]:
    """A started SQLite store on a fresh file, closed after the test: for the tests of what
    SQLite itself does."""
    sqlite = SQLiteJobStore(tmp_path / "jobs.db")
    await sqlite.start()
    try:
        yield sqlite
    finally:
        await sqlite.close()


@pytest.fixture
def make_deps(settings: Settings, store: JobStore) -> DepsFactory:
    return DepsFactory(settings=settings, store=store)


@pytest.fixture(params=["fast", "quart"])
async def api(make_deps: DepsFactory, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    """The app of the HTTP contract tests (``api_support.serve``), run once with each way in
    of ``POST /jobs``: ``[fast]`` (api/create.py's front) and ``[quart]`` (Quart alone).
    A test file that defines its own ``api`` uses that one instead."""
    from .api_support import api_deps, serve  # api_support imports this module

    async with serve(api_deps(make_deps), request.param) as served:
        yield served


def after(seconds: float) -> datetime:
    """BASE + ``seconds``."""
    return BASE + timedelta(seconds=seconds)
