"""The store double of the unit tests: :class:`ProxyStore` forwards every call to a real
store, and a test subclasses it to override single methods (to inject failures or observe
calls)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobscheduler.domain.attempts import Attempt
from jobscheduler.domain.audit import AuditQuery, AuditRecord
from jobscheduler.domain.cron import Occurrence
from jobscheduler.domain.flow import FlowReport, LimitOverride, TenantWeight
from jobscheduler.domain.keys import ApiKey
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.notifications import Delivery, Event, Webhook
from jobscheduler.domain.overview import OverviewStats
from jobscheduler.domain.retention import Override, PruneSummary
from jobscheduler.domain.states import Change, WorkflowChange
from jobscheduler.domain.workers import WorkerBeat
from jobscheduler.domain.workflows import Workflow, WorkflowStatus
from jobscheduler.store import JobStore
from jobscheduler.store.base import InsertOutcome
from jobscheduler.store.jobs import OccurrenceQuery
from jobscheduler.store.query import (
    Candidate,
    CountKey,
    Cursor,
    Exclusions,
    JobCounts,
    JobQuery,
    JobStats,
    Pick,
    Statuses,
)
from jobscheduler.store.workflows import TenantScope, WorkflowQuery


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

    async def occurrences(self, query: OccurrenceQuery, *, limit: int) -> list[Occurrence]:
        return await self.inner.occurrences(query, limit=limit)

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

    async def attempts_of(self, job_ids: Sequence[str]) -> dict[str, list[Attempt]]:
        return await self.inner.attempts_of(job_ids)

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
        self,
        query: WorkflowQuery,
        limit: int,
        after: Cursor | None = None,
        *,
        steps: bool = True,
    ) -> list[Workflow]:
        return await self.inner.find_workflows(query, limit, after, steps=steps)

    async def apply_workflow(self, change: WorkflowChange) -> Workflow | None:
        return await self.inner.apply_workflow(change)

    async def workflow_steps(self, workflow_id: str, *, tenant: str | None = None) -> list[Job]:
        return await self.inner.workflow_steps(workflow_id, tenant=tenant)

    async def any_job(self, query: JobQuery) -> bool:
        return await self.inner.any_job(query)

    async def clear_marks(self, steps: Sequence[Job]) -> int:
        return await self.inner.clear_marks(steps)

    async def spawned_results(self, spawner: str) -> dict[str, Any]:
        return await self.inner.spawned_results(spawner)

    async def release_spawned(self, spawner: str, now: datetime, limit: int) -> int:
        return await self.inner.release_spawned(spawner, now, limit)

    async def steps_to_settle(self, before: datetime, limit: int) -> list[Job]:
        return await self.inner.steps_to_settle(before, limit)

    async def expired_workflows(
        self, status: WorkflowStatus, before: datetime, limit: int, scope: TenantScope
    ) -> list[Workflow]:
        return await self.inner.expired_workflows(status, before, limit, scope)

    async def delete_workflow_record(self, workflow: Workflow) -> bool:
        return await self.inner.delete_workflow_record(workflow)

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
    ) -> list[Candidate]:
        return await self.inner.fair_candidates(now, per_group, exclude)

    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        return await self.inner.claim_picks(now, picks)

    async def queued_by_type(self, now: datetime) -> dict[str, int]:
        return await self.inner.queued_by_type(now)

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

    async def forget_ends(self, before: datetime) -> int:
        return await self.inner.forget_ends(before)

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
