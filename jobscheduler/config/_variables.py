"""Every environment variable, once, with the setting it fills, its parser and its meaning."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ._parsers import (
    LOG_FORMATS,
    LOG_LEVELS,
    _allowlist,
    _bool,
    _bool_or_auto,
    _choice,
    _csv,
    _non_empty,
    _non_negative_duration,
    _non_negative_float,
    _non_negative_int,
    _port,
    _positive_duration,
    _positive_int,
    _retention,
    _topic_prefix,
    _url,
    app_spec,
)


@attrs.frozen
class Variable:
    """One environment variable: the setting it fills, how its text is read, what it means.
    Its default is the Settings field's (``shown_default`` when that needs words)."""

    name: str
    field: str
    parse: Callable[[str], Any]
    description: str
    shown_default: str | None = None

    @property
    def unit(self) -> str:
        """How the value is written (from its parser)."""
        choices = getattr(self.parse, "choices", None)
        if choices:
            return "one of " + ", ".join(choices)
        return _UNITS.get(self.parse, "text")


_UNITS: dict[Callable[[str], Any], str] = {
    _positive_duration: "duration (500ms, 30s, 5m, 1h, 7d)",
    _non_negative_duration: "duration, 0 or more",
    _retention: "duration (500ms, 30s, 5m, 1h, 7d), at most 100 years",
    _port: "TCP port",
    _positive_int: "integer, 1 or more",
    _non_negative_int: "integer, 0 or more",
    _non_negative_float: "number, 0 or more",
    _csv: "comma-separated list",
    _allowlist: "comma-separated hosts, addresses, CIDR networks",
    _bool: "true or false",
    _bool_or_auto: "true, false or auto",
    app_spec: "MODULE[:ATTRIBUTE]",
    _topic_prefix: "text (A-Z a-z 0-9 . _ -)",
    _url: "http:// or https:// URL",
}

# Every environment variable, once: Settings.from_env reads these, the docs' configuration
# reference is generated from them, and the compose/k8s checks hold those files to them.
VARIABLES: tuple[Variable, ...] = (
    Variable(
        "API_HOST", "api_host", _non_empty, "HTTP API listener's host (0.0.0.0 in a container)"
    ),
    Variable("API_PORT", "api_port", _port, "HTTP API listener's port"),
    Variable(
        "METRICS_HOST", "metrics_host", _non_empty, "every role's /metrics, /healthz, /readyz host"
    ),
    Variable(
        "METRICS_PORT", "metrics_port", _port, "every role's /metrics, /healthz, /readyz port"
    ),
    Variable(
        "SQLITE_PATH",
        "sqlite_path",
        _non_empty,
        "the embedded store's file (dev; seed without MONGO_URI)",
    ),
    Variable(
        "SCHEDULER_TICK",
        "scheduler_tick",
        _positive_duration,
        "longest sleep of the scheduler between claims",
    ),
    Variable(
        "CLAIM_BATCH",
        "claim_batch",
        _positive_int,
        "jobs claimed per round trip (a tick keeps claiming while batches are full, "
        "doubling them; under flow control a pass starts at the room ahead of the executors)",
    ),
    Variable(
        "FLOW_CONTROL",
        "flow_control",
        _bool_or_auto,
        "fair claims across tenants, per-key concurrency and rate limits; 0: the plain "
        "priority claim; auto: on where the store serves the fair claim from its indexes "
        "(SQLite, memory), off on MongoDB",
        "auto",
    ),
    Variable(
        "CLAIM_AHEAD",
        "claim_ahead",
        _positive_int,
        "most jobs of one type kept queued ahead of its executors when none reports its "
        "slots (with executors: twice their slots, up to this)",
    ),
    Variable(
        "RATE_AHEAD",
        "rate_ahead",
        _non_negative_duration,
        "how far ahead the leader claims rate-limited jobs, each for its own start instant "
        "that the executors keep (0: at the rate, as they come due); at least twice "
        "ELECTION_TTL plus a claim keeps a rate steady while a new leader is elected",
    ),
    Variable(
        "QUEUED_TIMEOUT",
        "queued_timeout",
        _positive_duration,
        "queued longer than this: re-pended by the reaper",
    ),
    Variable(
        "CLAIM_TIMEOUT",
        "claim_timeout",
        _positive_duration,
        "no heartbeat for this long: the job is recovered as a failed attempt",
    ),
    Variable(
        "REAPER_INTERVAL", "reaper_interval", _positive_duration, "time between reaper sweeps"
    ),
    Variable(
        "HEARTBEAT_INTERVAL",
        "heartbeat_interval",
        _positive_duration,
        "executor heartbeat period (shorter than CLAIM_TIMEOUT)",
    ),
    Variable(
        "EXECUTOR_CONCURRENCY",
        "executor_concurrency",
        _positive_int,
        "handlers running at once per job type in one executor",
    ),
    Variable(
        "SHUTDOWN_GRACE",
        "shutdown_grace",
        _positive_duration,
        "on SIGTERM, how long running handlers may finish before they are handed back",
    ),
    Variable(
        "API_STORE_TIMEOUT",
        "api_store_timeout",
        _positive_duration,
        "bound of each store call an API request makes; past it the request answers 503",
    ),
    Variable(
        "UI_REFRESH", "ui_refresh", _positive_duration, "how often the dashboard re-reads its data"
    ),
    Variable("LOG_LEVEL", "log_level", _choice(*LOG_LEVELS), "the least severe events logged"),
    Variable(
        "LOG_FORMAT",
        "log_format",
        _choice(*LOG_FORMATS),
        "text (logfmt-style) or json, one line per event",
    ),
    Variable(
        "WORKER_ID",
        "worker_id",
        _non_empty,
        "this process's name in claimedBy and in logs",
        shown_default="<hostname>-<pid>",
    ),
    Variable("MONGO_URI", "mongo_uri", _non_empty, "the production store (run-<role>)"),
    Variable("MONGO_DB", "mongo_db", _non_empty, "the production store's database"),
    Variable("KAFKA_BROKERS", "kafka_brokers", _non_empty, "the production bus's brokers"),
    Variable(
        "KAFKA_PARTITIONS",
        "kafka_partitions",
        _positive_int,
        "partitions of the topics the bus creates",
    ),
    Variable(
        "KAFKA_TOPIC_PREFIX",
        "kafka_topic_prefix",
        _topic_prefix,
        "put before every topic and consumer group, so deployments can share a broker",
    ),
    Variable(
        "KAFKA_REJOIN_TIMEOUT",
        "kafka_rejoin_timeout",
        _positive_duration,
        "a consumer with no sign of group membership, or with an assigned partition it does "
        "not fetch, for this long is replaced",
    ),
    Variable(
        "KAFKA_UNHEALTHY_AFTER",
        "kafka_unhealthy_after",
        _positive_duration,
        "without group membership this long, the executor reports itself unhealthy",
    ),
    Variable("ETCD_ENDPOINTS", "etcd_endpoints", _csv, "the etcd endpoints of the election"),
    Variable("ELECTION_NAME", "election_name", _non_empty, "the etcd election's key prefix"),
    Variable("ELECTION_TTL", "election_ttl", _positive_int, "the election lease's TTL, in seconds"),
    Variable(
        "JOB_TYPE",
        "job_type",
        _non_empty,
        "run-executor: the job types it runs (one, a comma list, or * for all); dev runs all",
        shown_default="(none)",
    ),
    Variable(
        "ATTEMPT_RETENTION",
        "attempt_retention",
        _positive_duration,
        "attempt records older than this are deleted by the reaper",
    ),
    Variable(
        "JOBSCHEDULER_APP",
        "app",
        app_spec,
        "your handlers (a module's HandlerRegistry); --app wins",
        shown_default="(built-ins only)",
    ),
    Variable(
        "PROCESS_WORKERS",
        "process_workers",
        _positive_int,
        "worker processes running def handlers at once per executor",
        shown_default="one per CPU",
    ),
    Variable(
        "HTTP_ALLOWLIST",
        "http_allowlist",
        _allowlist,
        "internal destinations http jobs may reach; empty: public addresses only",
        shown_default="(none)",
    ),
    Variable(
        "HTTP_FOLLOW_REDIRECTS",
        "http_follow_redirects",
        _bool,
        "http jobs follow redirects, each hop checked again",
    ),
    Variable(
        "HTTP_MAX_REDIRECTS",
        "http_max_redirects",
        _positive_int,
        "most redirects one http job follows",
    ),
    Variable(
        "AUTH",
        "auth",
        _choice("required", "off"),
        "required: API keys on every request but health, the document and sign-in; off: every "
        "caller is an admin of every tenant",
        shown_default="required (run-<role>), off (dev)",
    ),
    Variable(
        "KEY_CACHE_TTL",
        "key_cache_ttl",
        _non_negative_duration,
        "how long an API process caches a key lookup (0: no cache)",
    ),
    Variable(
        "QUOTA_MAX_UNFINISHED",
        "quota_max_unfinished",
        _non_negative_int,
        "per tenant: jobs pending, queued, claimed or running; more creates answer 429 "
        "(0: no limit)",
    ),
    Variable(
        "QUOTA_CREATE_RATE",
        "quota_create_rate",
        _non_negative_float,
        "per key (per tenant with AUTH=off): jobs created per second (0: no limit)",
    ),
    Variable(
        "QUOTA_CREATE_BURST",
        "quota_create_burst",
        _positive_int,
        "per key: the create rate's bucket size",
    ),
    Variable(
        "AUDIT_RETENTION",
        "audit_retention",
        _positive_duration,
        "audit records older than this are pruned by the reaper",
    ),
    Variable(
        "CRON_LEDGER_RETENTION",
        "cron_ledger_retention",
        _positive_duration,
        "cron ledger records older than this are pruned by the reaper",
    ),
    Variable(
        "SYNC_SCHEDULES",
        "sync_schedules",
        _bool,
        "a scheduler (or dev) started with an app makes the stored templates match its schedules",
    ),
    Variable(
        "RETENTION_COMPLETED",
        "retention_completed",
        _retention,
        "completed jobs are kept this long after they finished, then pruned by the reaper "
        "with their attempt records (a handler's retention= and a tenant's override win)",
    ),
    Variable(
        "RETENTION_CANCELLED",
        "retention_cancelled",
        _retention,
        "cancelled jobs are kept this long after they finished (templates are never pruned)",
    ),
    Variable(
        "RETENTION_DLQ",
        "retention_dlq",
        _retention,
        "dead-lettered jobs are kept this long after they finished",
    ),
    Variable("PRUNE_BATCH", "prune_batch", _positive_int, "most jobs one prune statement deletes"),
    Variable(
        "PRUNE_PAUSE",
        "prune_pause",
        _non_negative_duration,
        "the reaper's pause between two prune statements, so creates and claims go first",
    ),
    Variable(
        "ARCHIVE_DIR",
        "archive_dir",
        _non_empty,
        "the reaper writes each job it prunes to <dir>/<tenant>/<day>.jsonl.gz before deleting it",
        shown_default="none",
    ),
    Variable(
        "NOTIFY_INTERVAL",
        "notify_interval",
        _positive_duration,
        "how often the notifier (reaper process, dev) sends due webhook deliveries",
    ),
    Variable(
        "NOTIFICATION_RETENTION",
        "notification_retention",
        _positive_duration,
        "finished webhook deliveries and their events older than this are pruned",
    ),
    Variable(
        "OTEL_SDK_DISABLED",
        "otel_sdk_disabled",
        _bool,
        "true: no spans, whatever else is set (docs/how-to/tracing.md)",
    ),
    Variable(
        "OTEL_TRACES_EXPORTER",
        "otel_traces_exporter",
        _choice("otlp", "console", "none"),
        "where spans go; empty: otlp when an OTLP endpoint is set, else no tracing",
        shown_default="(none)",
    ),
    Variable(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "otel_exporter_otlp_endpoint",
        _url,
        "the OTLP collector (traces go to <endpoint>/v1/traces over HTTP); setting it turns "
        "tracing on",
        shown_default="(none)",
    ),
    Variable(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "otel_exporter_otlp_traces_endpoint",
        _url,
        "the traces endpoint itself (wins over OTEL_EXPORTER_OTLP_ENDPOINT)",
        shown_default="(none)",
    ),
    Variable(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "otel_exporter_otlp_protocol",
        _choice("http/protobuf", "grpc"),
        "how spans are sent to the collector",
    ),
    Variable("OTEL_SERVICE_NAME", "otel_service_name", _non_empty, "the service.name of the spans"),
)

# Environment variable -> (Settings field, parser), as Settings.from_env reads them.
_VARIABLES: dict[str, tuple[str, Callable[[str], Any]]] = {
    v.name: (v.field, v.parse) for v in VARIABLES
}

ENVIRONMENT_VARIABLES: tuple[str, ...] = tuple(_VARIABLES)
