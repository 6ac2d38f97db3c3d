"""One frozen settings object, built once from the environment at start-up.

Nothing else in the package reads ``os.environ``. Every variable has an explicit default and
unit; a malformed value raises :class:`~jobscheduler.errors.ConfigError` whose message names
the variable, and the CLI prints that one line and exits.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

from jobscheduler.domain.addresses import Allowlist
from jobscheduler.domain.durations import parse_duration
from jobscheduler.errors import ConfigError

T = TypeVar("T")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


def _positive_duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError(f"must be greater than zero, got {text!r}")
    return seconds


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(f"not a TCP port: {text!r}")
    return port


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be a positive integer, got {text!r}")
    return value


def _non_negative_duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds < 0:
        raise ValueError(f"must not be negative, got {text!r}")
    return seconds


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be 0 or a positive integer, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"must be 0 or a positive number, got {text!r}")
    return value


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        for choice in choices:
            if value.upper() == choice.upper():
                return choice
        raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")

    parse.choices = choices  # type: ignore[attr-defined]  # the docs' "unit"
    return parse


def _non_empty(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


_TOPIC_PREFIX = re.compile(r"[A-Za-z0-9._-]{1,100}")


def _topic_prefix(text: str) -> str:
    if _TOPIC_PREFIX.fullmatch(text) is None:
        raise ValueError(
            f"must be at most 100 of the characters Kafka allows in names (A-Z a-z 0-9 . _ -), "
            f"got {text!r}"
        )
    return text


def _csv(text: str) -> tuple[str, ...]:
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    if not items:
        raise ValueError("must list at least one item")
    return items


_APP_SPEC = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*(:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*)?")


def app_spec(text: str) -> str:
    """``MODULE[:ATTRIBUTE]`` (dotted names), e.g. ``myjobs`` or ``myapp.jobs:registry``."""
    value = text.strip()
    if _APP_SPEC.fullmatch(value) is None:
        raise ValueError(f"must be MODULE or MODULE:ATTRIBUTE (e.g. myjobs:registry), got {text!r}")
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"must be true or false (or 1/0, yes/no, on/off), got {text!r}")


def _allowlist(text: str) -> tuple[str, ...]:
    entries = _csv(text)
    Allowlist.parse(entries)  # raises ValueError naming a bad entry
    return entries


def _url(text: str) -> str:
    value = text.strip()
    if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
        raise ValueError(f"must be an http:// or https:// URL, got {text!r}")
    return value


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@attrs.frozen(kw_only=True)
class Settings:
    """Every knob of every role. Durations are seconds (floats)."""

    api_host: str = "127.0.0.1"
    api_port: int = 8080
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9100
    sqlite_path: str = "./data/jobscheduler.db"
    scheduler_tick: float = 0.5
    claim_batch: int = 20
    #: Fair claims, per-key concurrency and rate limits (off: the plain priority claim).
    flow_control: bool = True
    #: Most jobs of one type kept queued ahead of its executors when none reports its
    #: capacity (with executors: twice the slots they report, up to this).
    claim_ahead: int = 256
    queued_timeout: float = 30.0
    #: No heartbeat for this long (heartbeats come every HEARTBEAT_INTERVAL) means the
    #: executor is dead: 45 s misses four heartbeats, so a dead executor's jobs run again
    #: within about a minute (plus up to REAPER_INTERVAL).
    claim_timeout: float = 45.0
    reaper_interval: float = 30.0
    heartbeat_interval: float = 10.0
    executor_concurrency: int = 32
    shutdown_grace: float = 10.0
    #: Bound of each store call an API request makes; past it the request answers 503.
    api_store_timeout: float = 2.0
    #: How often the dashboard's pages re-read their data (``/ui``).
    ui_refresh: float = 5.0
    log_level: str = "INFO"
    log_format: str = "text"
    worker_id: str = attrs.field(factory=_default_worker_id)
    # Production adapters (run-<role>).
    mongo_uri: str = "mongodb://127.0.0.1:27017"
    mongo_db: str = "jobscheduler"
    kafka_brokers: str = "127.0.0.1:9092"
    kafka_partitions: int = 3
    kafka_topic_prefix: str = ""
    #: A consumer with no sign of group membership for this long is replaced by a new one.
    kafka_rejoin_timeout: float = 20.0
    #: ... and after this long without membership the executor reports itself unhealthy.
    kafka_unhealthy_after: float = 60.0
    etcd_endpoints: tuple[str, ...] = ("127.0.0.1:2379",)
    election_name: str = "jobscheduler/scheduler-leader"
    election_ttl: int = 10
    job_type: str = ""
    #: How long attempt records are kept (the reaper prunes older ones).
    attempt_retention: float = 30 * 24 * 3600.0
    #: The user's handlers, ``MODULE[:ATTRIBUTE]`` (``--app`` wins); empty: built-ins only.
    app: str = ""
    #: Worker processes running ``def`` handlers at once per executor; 0: one per CPU.
    process_workers: int = 0
    # The built-in http handler: internal hosts/networks it may reach, redirect policy.
    http_allowlist: tuple[str, ...] = ()
    http_follow_redirects: bool = False
    http_max_redirects: int = 5
    # Tenancy (docs: "Keys and tenants"): AUTH is "required" or "off"; the CLI defaults it to
    # "required" for run-api and to "off" for dev (this default is the library's).
    auth: str = "off"
    key_cache_ttl: float = 5.0
    #: Per tenant: jobs not finished (pending+queued+claimed+running); 0: no limit.
    quota_max_unfinished: int = 1_000_000
    #: Per key (per tenant with AUTH=off): job creates per second, and the burst; 0: no limit.
    quota_create_rate: float = 5000.0
    quota_create_burst: int = 50_000
    audit_retention: float = 90 * 86400.0
    #: How long cron ledger records are kept (the reaper prunes older ones); 30 days.
    cron_ledger_retention: float = 30 * 24 * 3600.0
    #: How long finished jobs are kept after they finish, per status (the reaper prunes
    #: older ones, with their attempt records; templates and unfinished jobs never). A
    #: handler's ``retention`` option and a tenant's override (``jobscheduler retention``)
    #: take precedence.
    retention_completed: float = 7 * 86400.0
    retention_cancelled: float = 7 * 86400.0
    retention_dlq: float = 30 * 86400.0
    #: Most jobs one prune statement deletes, and the pause between two, so that a prune of
    #: millions never holds the store's writer for long.
    prune_batch: int = 2000
    prune_pause: float = 0.05
    #: A directory where the reaper writes every job it prunes (one gzip JSON Lines file per
    #: day and tenant) before deleting it; empty: pruned jobs are not kept.
    archive_dir: str = ""
    #: A scheduler (or ``dev``) started with an app syncs its schedules at start.
    sync_schedules: bool = False
    #: How often the notifier (in the reaper's process and ``dev``) looks for webhook
    #: deliveries to send; and how long finished deliveries are kept.
    notify_interval: float = 1.0
    notification_retention: float = 30 * 24 * 3600.0
    # OpenTelemetry (``pip install jobscheduler[otel]``; docs/how-to/tracing.md): the standard
    # variables that decide whether spans are made and where they go. The exporter reads
    # the rest of its own (``OTEL_EXPORTER_OTLP_HEADERS``, timeouts, the batch processor).
    otel_sdk_disabled: bool = False
    #: ``otlp``, ``console`` or ``none``; empty: ``otlp`` if an OTLP endpoint is set, else none.
    otel_traces_exporter: str = ""
    otel_exporter_otlp_endpoint: str = ""
    otel_exporter_otlp_traces_endpoint: str = ""
    otel_exporter_otlp_protocol: str = "http/protobuf"
    otel_service_name: str = "jobscheduler"
    #: The variables that were set in the environment (to tell "unset" from "the default").
    configured: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default: ``os.environ``).

        Raises ConfigError whose message names the offending variable.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, (field, parse) in _VARIABLES.items():
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            try:
                values[field] = parse(raw)
            except ValueError as exc:
                raise ConfigError(f"{name}: {exc}") from None
        settings = cls(**values, configured=frozenset(n for n in _VARIABLES if env.get(n)))
        if settings.heartbeat_interval >= settings.claim_timeout:
            raise ConfigError(
                "HEARTBEAT_INTERVAL: must be shorter than CLAIM_TIMEOUT "
                f"({settings.heartbeat_interval}s >= {settings.claim_timeout}s), "
                "or every running job would look lost"
            )
        return settings


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
    _port: "TCP port",
    _positive_int: "integer, 1 or more",
    _non_negative_int: "integer, 0 or more",
    _non_negative_float: "number, 0 or more",
    _csv: "comma-separated list",
    _allowlist: "comma-separated hosts, addresses, CIDR networks",
    _bool: "true or false",
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
        "jobs claimed per round trip (a tick keeps claiming while batches are full)",
    ),
    Variable(
        "FLOW_CONTROL",
        "flow_control",
        _bool,
        "fair claims across tenants, per-key concurrency and rate limits; 0: the plain "
        "priority claim",
    ),
    Variable(
        "CLAIM_AHEAD",
        "claim_ahead",
        _positive_int,
        "most jobs of one type kept queued ahead of its executors when none reports its "
        "slots (with executors: twice their slots, up to this)",
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
        "a consumer with no sign of group membership for this long is replaced",
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
        _positive_duration,
        "completed jobs are kept this long after they finished, then pruned by the reaper "
        "with their attempt records (a handler's retention= and a tenant's override win)",
    ),
    Variable(
        "RETENTION_CANCELLED",
        "retention_cancelled",
        _positive_duration,
        "cancelled jobs are kept this long after they finished (templates are never pruned)",
    ),
    Variable(
        "RETENTION_DLQ",
        "retention_dlq",
        _positive_duration,
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


#: Where :mod:`jobscheduler.client` and the CLI find the API when no URL is given.
DEFAULT_CLIENT_URL = "http://127.0.0.1:8080"


@attrs.frozen(kw_only=True)
class ClientSettings:
    """The client's connection: ``JOBSCHEDULER_URL`` and ``JOBSCHEDULER_API_KEY``; and
    ``JOBSCHEDULER_TENANT``, the tenant of jobs that task handles enqueue without one."""

    url: str = DEFAULT_CLIENT_URL
    api_key: str | None = None
    tenant_id: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClientSettings:
        env = os.environ if env is None else env
        url = env.get("JOBSCHEDULER_URL", "").strip() or DEFAULT_CLIENT_URL
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"JOBSCHEDULER_URL: must start with http:// or https://: {url!r}")
        key = env.get("JOBSCHEDULER_API_KEY", "").strip() or None
        tenant = env.get("JOBSCHEDULER_TENANT", "").strip() or None
        return cls(url=url.rstrip("/"), api_key=key, tenant_id=tenant)
