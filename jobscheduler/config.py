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
    # Tenancy (README "Security"): AUTH is "required" or "off"; the CLI defaults it to
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
    #: A scheduler (or ``dev``) started with an app syncs its schedules at start.
    sync_schedules: bool = False
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


# Environment variable -> (Settings field, parser). The README's configuration table and the
# compose/k8s checks are built from this one mapping.
_VARIABLES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "API_HOST": ("api_host", _non_empty),
    "API_PORT": ("api_port", _port),
    "METRICS_HOST": ("metrics_host", _non_empty),
    "METRICS_PORT": ("metrics_port", _port),
    "SQLITE_PATH": ("sqlite_path", _non_empty),
    "SCHEDULER_TICK": ("scheduler_tick", _positive_duration),
    "CLAIM_BATCH": ("claim_batch", _positive_int),
    "QUEUED_TIMEOUT": ("queued_timeout", _positive_duration),
    "CLAIM_TIMEOUT": ("claim_timeout", _positive_duration),
    "REAPER_INTERVAL": ("reaper_interval", _positive_duration),
    "HEARTBEAT_INTERVAL": ("heartbeat_interval", _positive_duration),
    "EXECUTOR_CONCURRENCY": ("executor_concurrency", _positive_int),
    "SHUTDOWN_GRACE": ("shutdown_grace", _positive_duration),
    "API_STORE_TIMEOUT": ("api_store_timeout", _positive_duration),
    "UI_REFRESH": ("ui_refresh", _positive_duration),
    "LOG_LEVEL": ("log_level", _choice(*LOG_LEVELS)),
    "LOG_FORMAT": ("log_format", _choice(*LOG_FORMATS)),
    "WORKER_ID": ("worker_id", _non_empty),
    "MONGO_URI": ("mongo_uri", _non_empty),
    "MONGO_DB": ("mongo_db", _non_empty),
    "KAFKA_BROKERS": ("kafka_brokers", _non_empty),
    "KAFKA_PARTITIONS": ("kafka_partitions", _positive_int),
    "KAFKA_TOPIC_PREFIX": ("kafka_topic_prefix", _topic_prefix),
    "KAFKA_REJOIN_TIMEOUT": ("kafka_rejoin_timeout", _positive_duration),
    "KAFKA_UNHEALTHY_AFTER": ("kafka_unhealthy_after", _positive_duration),
    "ETCD_ENDPOINTS": ("etcd_endpoints", _csv),
    "ELECTION_NAME": ("election_name", _non_empty),
    "ELECTION_TTL": ("election_ttl", _positive_int),
    "JOB_TYPE": ("job_type", _non_empty),
    "ATTEMPT_RETENTION": ("attempt_retention", _positive_duration),
    "JOBSCHEDULER_APP": ("app", app_spec),
    "PROCESS_WORKERS": ("process_workers", _positive_int),
    "HTTP_ALLOWLIST": ("http_allowlist", _allowlist),
    "HTTP_FOLLOW_REDIRECTS": ("http_follow_redirects", _bool),
    "HTTP_MAX_REDIRECTS": ("http_max_redirects", _positive_int),
    "AUTH": ("auth", _choice("required", "off")),
    "KEY_CACHE_TTL": ("key_cache_ttl", _non_negative_duration),
    "QUOTA_MAX_UNFINISHED": ("quota_max_unfinished", _non_negative_int),
    "QUOTA_CREATE_RATE": ("quota_create_rate", _non_negative_float),
    "QUOTA_CREATE_BURST": ("quota_create_burst", _positive_int),
    "AUDIT_RETENTION": ("audit_retention", _positive_duration),
    "CRON_LEDGER_RETENTION": ("cron_ledger_retention", _positive_duration),
    "SYNC_SCHEDULES": ("sync_schedules", _bool),
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
