"""Prometheus metrics: every metric the roles export, on one registry owned by the process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_HANDLER_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900)


class Metrics:
    """Every metric the roles export, on one registry owned by the process (not global)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.scheduler_tick_duration = Histogram(
            "scheduler_tick_duration_seconds",
            "Time spent in one scheduler tick (claiming, publishing, spawning).",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.scheduler_jobs_claimed = Counter(
            "scheduler_jobs_claimed_total", "Jobs moved from pending to queued.", registry=r
        )
        self.scheduler_held = Counter(
            "scheduler_held_total",
            "Due jobs a claim held back, by reason (a job held in several claims counts in each).",
            ["reason"],
            registry=r,
        )
        self.scheduler_waiting = Gauge(
            "scheduler_waiting_jobs",
            "Due jobs the leader's latest claims held back, by reason (a lower bound).",
            ["reason"],
            registry=r,
        )
        self.scheduler_dispatch_errors = Counter(
            "scheduler_dispatch_errors_total",
            "Claimed jobs whose wake-up could not be published (the reaper re-pends them).",
            registry=r,
        )
        self.scheduler_cron_spawned = Counter(
            "scheduler_cron_instances_spawned_total",
            "One-off instances inserted by cron templates.",
            registry=r,
        )
        self.scheduler_cron_lag = Histogram(
            "scheduler_cron_lag_seconds",
            "Spawn time minus fire time of each cron run spawned.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600),
            registry=r,
        )
        self.scheduler_cron_skipped = Counter(
            "scheduler_cron_skipped_total",
            "Cron fire times recorded in the ledger without a run, by reason.",
            ["reason"],
            registry=r,
        )
        self.scheduler_cron_cancelled_previous = Counter(
            "scheduler_cron_cancelled_previous_total",
            "Unfinished cron runs cancelled (or asked to stop) by a newer fire time of their "
            "template under overlap=cancel_previous.",
            registry=r,
        )
        self.scheduler_invalid_cron = Counter(
            "scheduler_invalid_cron_templates_total",
            "Cron templates dead-lettered because their expression no longer parses.",
            registry=r,
        )
        self.scheduler_pass_errors = Counter(
            "scheduler_pass_errors_total",
            "Dispatch passes that failed (kind: store, or unexpected); the loop backs off and "
            "goes on.",
            ["kind"],
            registry=r,
        )
        self.scheduler_templates_dead_lettered = Counter(
            "scheduler_templates_dead_lettered_total",
            "Cron templates the scheduler dead-lettered because it could not fire them "
            "(reason: error, or stuck: still due after many passes).",
            ["reason"],
            registry=r,
        )
        self.scheduler_is_leader = Gauge(
            "scheduler_is_leader", "1 while this scheduler instance holds leadership.", registry=r
        )
        self.executor_processed = Counter(
            "executor_jobs_processed_total",
            "Bus messages handled, by job type and result "
            "(completed, retried, dlq, stale, released).",
            ["job_type", "result"],
            registry=r,
        )
        self.executor_handler_duration = Histogram(
            "executor_handler_duration_seconds",
            "Handler run time.",
            ["job_type"],
            buckets=_HANDLER_BUCKETS,
            registry=r,
        )
        self.reaper_pruned = Counter(
            "reaper_pruned_jobs_total",
            "Finished jobs deleted by the reaper once their retention passed, by status.",
            ["status"],
            registry=r,
        )
        self.reaper_pruned_workflows = Counter(
            "reaper_pruned_workflows_total",
            "Finished workflows deleted by the reaper (with their steps) once their retention "
            "passed, by status.",
            ["status"],
            registry=r,
        )
        self.reaper_recovered = Counter(
            "reaper_recovered_jobs_total",
            "Stuck jobs returned to pending (or dead-lettered), by sweep (queued, claimed).",
            ["sweep"],
            registry=r,
        )
        self.transitions_lost = Counter(
            "jobs_transitions_lost_total",
            "Conditional updates that matched nothing (a race lost, or a stale claim token).",
            ["transition"],
            registry=r,
        )
        # Workflows (jobscheduler.roles.workflows).
        self.workflow_steps_settled = Counter(
            "workflow_steps_settled_total",
            "Waiting workflow steps moved because of the jobs they wait for: released "
            "(waiting -> pending) or cancelled (a parent failed, or the workflow was cancelled), "
            "by who noticed (executor, api, reaper, scheduler).",
            ["outcome", "by"],
            registry=r,
        )
        self.workflows_finished = Counter(
            "workflows_finished_total",
            "Workflows that ended, by status (completed, failed, cancelled).",
            ["status"],
            registry=r,
        )
        self.api_requests = Counter(
            "api_requests_total",
            "HTTP requests served by the API.",
            ["method", "route", "status"],
            registry=r,
        )
        self.api_request_duration = Histogram(
            "api_request_duration_seconds",
            "HTTP request latency.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # Tenancy (jobscheduler.api.tenancy).
        self.api_quota_rejections = Counter(
            "api_quota_rejections_total",
            "Requests refused by a tenant quota (429), by reason (rate, unfinished).",
            ["reason"],
            registry=r,
        )
        self.api_auth_failures = Counter(
            "api_auth_failures_total",
            "Requests refused with 401 (no, malformed, unknown or revoked API key).",
            registry=r,
        )
        self.api_audit_failures = Counter(
            "api_audit_write_failures_total",
            "Audit records that could not be written (the request itself was served).",
            registry=r,
        )
        for reason in ("rate", "unfinished"):
            self.api_quota_rejections.labels(reason=reason)
        self.jobs = Gauge(
            "jobs",
            "Jobs by status and job type (every tenant), sampled by the reaper.",
            ["status", "job_type"],
            registry=r,
        )
        self.queue_lag = Gauge(
            "jobs_queue_lag_seconds",
            "How long the oldest due pending one-off job has waited past its scheduledAt, "
            "sampled by the reaper.",
            registry=r,
        )
        self.notifier_deliveries = Counter(
            "notifier_deliveries_total",
            "Tries of webhook deliveries by result (delivered, retried, failed).",
            ["result"],
            registry=r,
        )
        for sweep in ("queued", "claimed"):
            self.reaper_recovered.labels(sweep=sweep)
        for status in ("completed", "cancelled", "dlq"):
            self.reaper_pruned.labels(status=status)
        for status in ("completed", "failed", "cancelled"):
            self.reaper_pruned_workflows.labels(status=status)
        for result in ("delivered", "retried", "failed"):
            self.notifier_deliveries.labels(result=result)
