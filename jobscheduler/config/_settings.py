"""The settings of the roles and of the client, each built once from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from jobscheduler.errors import ConfigError

from ._parsers import _default_worker_id
from ._variables import _VARIABLES


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
    flow_control: bool | None = None
    #: Most jobs of one type kept queued ahead of its executors when none reports its
    #: capacity (with executors: twice the slots they report, up to this).
    claim_ahead: int = 256
    rate_ahead: float = 0.0
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
