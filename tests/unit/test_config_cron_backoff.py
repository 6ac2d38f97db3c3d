"""Settings from the environment, durations, retry backoff, and cron fire times."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from jobscheduler.config import ENVIRONMENT_VARIABLES, Settings
from jobscheduler.domain.backoff import MAX_BACKOFF_SECONDS, backoff_seconds
from jobscheduler.domain.cron import next_fire, validate
from jobscheduler.domain.durations import parse_duration
from jobscheduler.errors import ConfigError, ValidationError

# ----------------------------------------------------------------------- parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("7d", 604800.0),
        ("0.5d", 43200.0),
        ("1.5m", 90.0),
        ("0.25s", 0.25),
        (" 30s ", 30.0),
        ("10", 10.0),
        ("2.5", 2.5),
        ("0", 0.0),
    ],
)
def test_parse_duration_accepts_units_and_bare_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["banana", "", "5x", "5 minutes", "ms", "d", "1w", "1h30m", "nan", "inf", "-5s", "5S"],
)
def test_parse_duration_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


# ----------------------------------------------------------------------- Settings.from_env


def test_from_env_with_empty_environment_gives_documented_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.api_host == "127.0.0.1"
    assert settings.api_port == 8080
    assert settings.metrics_host == "127.0.0.1"
    assert settings.metrics_port == 9100
    assert settings.sqlite_path == "./data/jobscheduler.db"
    assert settings.scheduler_tick == 0.5
    assert settings.claim_batch == 20
    assert settings.queued_timeout == 30.0
    assert settings.claim_timeout == 45.0
    assert settings.api_store_timeout == 2.0
    assert settings.reaper_interval == 30.0
    assert settings.heartbeat_interval == 10.0
    assert settings.executor_concurrency == 32
    assert settings.shutdown_grace == 10.0
    assert settings.log_level == "INFO"
    assert settings.log_format == "text"
    assert settings.worker_id == f"{socket.gethostname()}-{os.getpid()}"
    assert settings.mongo_uri == "mongodb://127.0.0.1:27017"
    assert settings.mongo_db == "jobscheduler"
    assert settings.kafka_brokers == "127.0.0.1:9092"
    assert settings.kafka_partitions == 3
    assert settings.etcd_endpoints == ("127.0.0.1:2379",)
    assert settings.election_name == "jobscheduler/scheduler-leader"
    assert settings.election_ttl == 10
    assert settings.job_type == ""
    assert settings.http_allowlist == ()
    assert settings.http_follow_redirects is False
    assert settings.http_max_redirects == 5


def test_from_env_treats_empty_values_as_unset() -> None:
    assert Settings.from_env({"SCHEDULER_TICK": "", "API_PORT": ""}) == Settings.from_env({})


# Every variable: (raw value, Settings field, parsed value).
PARSED: dict[str, tuple[str, str, Any]] = {
    "API_HOST": ("0.0.0.0", "api_host", "0.0.0.0"),
    "API_PORT": ("18080", "api_port", 18080),
    "METRICS_HOST": (" ::1 ", "metrics_host", "::1"),
    "METRICS_PORT": ("0", "metrics_port", 0),
    "SQLITE_PATH": ("/tmp/x/jobs.db", "sqlite_path", "/tmp/x/jobs.db"),
    "SCHEDULER_TICK": ("250ms", "scheduler_tick", 0.25),
    "CLAIM_BATCH": ("50", "claim_batch", 50),
    "FLOW_CONTROL": ("off", "flow_control", False),
    "CLAIM_AHEAD": ("64", "claim_ahead", 64),
    "RATE_AHEAD": ("15s", "rate_ahead", 15.0),
    "QUEUED_TIMEOUT": ("1m", "queued_timeout", 60.0),
    "CLAIM_TIMEOUT": ("1h", "claim_timeout", 3600.0),
    "REAPER_INTERVAL": ("15s", "reaper_interval", 15.0),
    "HEARTBEAT_INTERVAL": ("5", "heartbeat_interval", 5.0),
    "EXECUTOR_CONCURRENCY": ("4", "executor_concurrency", 4),
    "SHUTDOWN_GRACE": ("2s", "shutdown_grace", 2.0),
    "API_STORE_TIMEOUT": ("1500ms", "api_store_timeout", 1.5),
    "UI_REFRESH": ("2s", "ui_refresh", 2.0),
    "LOG_LEVEL": ("debug", "log_level", "DEBUG"),
    "LOG_FORMAT": ("JSON", "log_format", "json"),
    "WORKER_ID": ("worker-7", "worker_id", "worker-7"),
    "MONGO_URI": ("mongodb://db:27017", "mongo_uri", "mongodb://db:27017"),
    "MONGO_DB": ("jobs", "mongo_db", "jobs"),
    "KAFKA_BROKERS": ("k1:9092,k2:9092", "kafka_brokers", "k1:9092,k2:9092"),
    "KAFKA_PARTITIONS": ("12", "kafka_partitions", 12),
    "KAFKA_TOPIC_PREFIX": ("staging.", "kafka_topic_prefix", "staging."),
    "KAFKA_REJOIN_TIMEOUT": ("15s", "kafka_rejoin_timeout", 15.0),
    "KAFKA_UNHEALTHY_AFTER": ("2m", "kafka_unhealthy_after", 120.0),
    "ETCD_ENDPOINTS": (" a:2379, b:2379 ,", "etcd_endpoints", ("a:2379", "b:2379")),
    "ELECTION_NAME": ("x/leader", "election_name", "x/leader"),
    "ELECTION_TTL": ("30", "election_ttl", 30),
    "JOB_TYPE": ("flaky", "job_type", "flaky"),
    "ATTEMPT_RETENTION": ("48h", "attempt_retention", 172800.0),
    "JOBSCHEDULER_APP": (" myapp.jobs:registry ", "app", "myapp.jobs:registry"),
    "PROCESS_WORKERS": ("8", "process_workers", 8),
    "HTTP_ALLOWLIST": (
        " 127.0.0.1, 10.0.0.0/8 ,hooks.internal",
        "http_allowlist",
        ("127.0.0.1", "10.0.0.0/8", "hooks.internal"),
    ),
    "HTTP_FOLLOW_REDIRECTS": ("yes", "http_follow_redirects", True),
    "HTTP_MAX_REDIRECTS": ("3", "http_max_redirects", 3),
    "AUTH": ("Required", "auth", "required"),
    "KEY_CACHE_TTL": ("0", "key_cache_ttl", 0.0),
    "QUOTA_MAX_UNFINISHED": ("0", "quota_max_unfinished", 0),
    "QUOTA_CREATE_RATE": ("2.5", "quota_create_rate", 2.5),
    "QUOTA_CREATE_BURST": ("10", "quota_create_burst", 10),
    "AUDIT_RETENTION": ("30h", "audit_retention", 30 * 3600.0),
    "CRON_LEDGER_RETENTION": ("168h", "cron_ledger_retention", 7 * 24 * 3600.0),
    "SYNC_SCHEDULES": ("1", "sync_schedules", True),
    "RETENTION_COMPLETED": ("1d", "retention_completed", 86400.0),
    "RETENTION_CANCELLED": ("12h", "retention_cancelled", 12 * 3600.0),
    "RETENTION_DLQ": ("90d", "retention_dlq", 90 * 86400.0),
    "PRUNE_BATCH": ("500", "prune_batch", 500),
    "PRUNE_PAUSE": ("0", "prune_pause", 0.0),
    "ARCHIVE_DIR": (" /var/lib/jobs-archive ", "archive_dir", "/var/lib/jobs-archive"),
    "NOTIFY_INTERVAL": ("250ms", "notify_interval", 0.25),
    "NOTIFICATION_RETENTION": ("24h", "notification_retention", 86400.0),
    "OTEL_SDK_DISABLED": ("true", "otel_sdk_disabled", True),
    "OTEL_TRACES_EXPORTER": ("CONSOLE", "otel_traces_exporter", "console"),
    "OTEL_EXPORTER_OTLP_ENDPOINT": (
        "http://127.0.0.1:4318",
        "otel_exporter_otlp_endpoint",
        "http://127.0.0.1:4318",
    ),
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": (
        "http://127.0.0.1:4318/v1/traces",
        "otel_exporter_otlp_traces_endpoint",
        "http://127.0.0.1:4318/v1/traces",
    ),
    "OTEL_EXPORTER_OTLP_PROTOCOL": ("grpc", "otel_exporter_otlp_protocol", "grpc"),
    "OTEL_SERVICE_NAME": ("billing-jobs", "otel_service_name", "billing-jobs"),
}


def test_every_environment_variable_has_a_parsing_case() -> None:
    assert set(PARSED) == set(ENVIRONMENT_VARIABLES)


@pytest.mark.parametrize("name", sorted(PARSED))
def test_from_env_parses_each_variable(name: str) -> None:
    raw, field, expected = PARSED[name]
    assert getattr(Settings.from_env({name: raw}), field) == expected


def test_from_env_parses_all_variables_together() -> None:
    settings = Settings.from_env({name: raw for name, (raw, _, _) in PARSED.items()})
    for name, (_, field, expected) in PARSED.items():
        assert getattr(settings, field) == expected, name


BAD: list[tuple[str, str]] = [
    ("API_PORT", "http"),
    ("API_PORT", "70000"),
    ("API_PORT", "-1"),
    ("METRICS_PORT", "9100.5"),
    ("API_HOST", "   "),
    ("METRICS_HOST", "\t"),
    ("SQLITE_PATH", " "),
    ("SCHEDULER_TICK", "banana"),
    ("SCHEDULER_TICK", "0"),
    ("SCHEDULER_TICK", "0ms"),
    ("CLAIM_BATCH", "0"),
    ("CLAIM_BATCH", "ten"),
    ("QUEUED_TIMEOUT", "-5"),
    ("RATE_AHEAD", "-1s"),
    ("CLAIM_TIMEOUT", "forever"),
    ("REAPER_INTERVAL", "nan"),
    ("HEARTBEAT_INTERVAL", "1d"),
    ("EXECUTOR_CONCURRENCY", "-3"),
    ("SHUTDOWN_GRACE", "soon"),
    ("API_STORE_TIMEOUT", "0"),
    ("UI_REFRESH", "0"),
    ("LOG_LEVEL", "TRACE"),
    ("LOG_FORMAT", "xml"),
    ("WORKER_ID", "  "),
    ("MONGO_URI", " "),
    ("MONGO_DB", " "),
    ("KAFKA_BROKERS", " "),
    ("KAFKA_PARTITIONS", "3.5"),
    ("KAFKA_TOPIC_PREFIX", "team a/"),
    ("KAFKA_TOPIC_PREFIX", "x" * 101),
    ("KAFKA_REJOIN_TIMEOUT", "0s"),
    ("KAFKA_UNHEALTHY_AFTER", "soon"),
    ("ETCD_ENDPOINTS", " , ,"),
    ("ELECTION_NAME", " "),
    ("ELECTION_TTL", "0"),
    ("JOB_TYPE", "   "),
    ("ATTEMPT_RETENTION", "0s"),
    ("JOBSCHEDULER_APP", "my jobs"),
    ("JOBSCHEDULER_APP", "myjobs:registry:extra"),
    ("JOBSCHEDULER_APP", "myjobs:"),
    ("PROCESS_WORKERS", "0"),
    ("HTTP_ALLOWLIST", "10.0.0.1/8"),
    ("HTTP_ALLOWLIST", "127.0.0.1, http://hooks"),
    ("HTTP_ALLOWLIST", "2130706433"),
    ("HTTP_FOLLOW_REDIRECTS", "maybe"),
    ("HTTP_MAX_REDIRECTS", "0"),
    ("AUTH", "maybe"),
    ("KEY_CACHE_TTL", "-1s"),
    ("QUOTA_MAX_UNFINISHED", "-1"),
    ("QUOTA_CREATE_RATE", "inf"),
    ("QUOTA_CREATE_RATE", "nan"),
    ("QUOTA_CREATE_BURST", "0"),
    ("AUDIT_RETENTION", "0"),
    ("CRON_LEDGER_RETENTION", "0s"),
    ("SYNC_SCHEDULES", "sometimes"),
    ("FLOW_CONTROL", "sometimes"),
    ("CLAIM_AHEAD", "0"),
    ("RETENTION_COMPLETED", "0d"),
    ("RETENTION_CANCELLED", "7 days"),
    ("RETENTION_DLQ", "-1d"),
    ("PRUNE_BATCH", "0"),
    ("PRUNE_PAUSE", "-5ms"),
    ("ARCHIVE_DIR", "   "),
    ("NOTIFY_INTERVAL", "0s"),
    ("NOTIFICATION_RETENTION", "forever"),
    ("OTEL_TRACES_EXPORTER", "zipkin"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ("OTEL_SDK_DISABLED", "maybe"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://collector/v1/traces"),
    ("OTEL_SERVICE_NAME", "   "),
]


def test_every_environment_variable_has_a_bad_value_case() -> None:
    assert {name for name, _ in BAD} == set(ENVIRONMENT_VARIABLES)


@pytest.mark.parametrize(("name", "raw"), BAD)
def test_bad_value_raises_config_error_naming_the_variable(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"^{name}: "):
        Settings.from_env({name: raw})


@pytest.mark.parametrize(
    "env",
    [
        {"HEARTBEAT_INTERVAL": "5m"},
        {"HEARTBEAT_INTERVAL": "300s"},
        {"HEARTBEAT_INTERVAL": "10s", "CLAIM_TIMEOUT": "5s"},
        {"HEARTBEAT_INTERVAL": "10s", "CLAIM_TIMEOUT": "10s"},
    ],
)
def test_heartbeat_interval_not_shorter_than_claim_timeout_is_rejected(
    env: dict[str, str],
) -> None:
    with pytest.raises(ConfigError, match=r"^HEARTBEAT_INTERVAL: must be shorter than"):
        Settings.from_env(env)


def test_heartbeat_interval_just_below_claim_timeout_is_accepted() -> None:
    settings = Settings.from_env({"HEARTBEAT_INTERVAL": "9s", "CLAIM_TIMEOUT": "10s"})
    assert (settings.heartbeat_interval, settings.claim_timeout) == (9.0, 10.0)


def test_dev_with_a_bad_setting_exits_non_zero_with_one_stderr_line(tmp_path: Path) -> None:
    env = {**os.environ, "SCHEDULER_TICK": "banana", "SQLITE_PATH": str(tmp_path / "j.db")}
    proc = subprocess.run(
        [sys.executable, "-m", "jobscheduler", "dev"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "SCHEDULER_TICK" in lines[0]
    assert "banana" in lines[0]
    assert proc.stdout == ""
    assert not (tmp_path / "j.db").exists()


# ----------------------------------------------------------------------- backoff


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (7, 128.0), (8, 256.0)],
)
def test_backoff_doubles_per_attempt(attempt: int, seconds: float) -> None:
    assert backoff_seconds(attempt) == seconds


@pytest.mark.parametrize("attempt", [9, 10, 50, 10**9])
def test_backoff_is_capped_at_five_minutes(attempt: int) -> None:
    assert backoff_seconds(attempt) == MAX_BACKOFF_SECONDS == 300.0


def test_backoff_rejects_negative_attempts() -> None:
    with pytest.raises(ValueError, match="attempt must be >= 0"):
        backoff_seconds(-1)


# ----------------------------------------------------------------------- cron


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("0 2 * * *", datetime(2026, 9, 29, 18, 0, tzinfo=UTC), datetime(2026, 9, 30, 2, 0)),
        ("0 2 * * *", datetime(2026, 9, 30, 1, 59, 59, tzinfo=UTC), datetime(2026, 9, 30, 2, 0)),
        ("*/5 * * * *", datetime(2026, 1, 1, 0, 3, tzinfo=UTC), datetime(2026, 1, 1, 0, 5)),
        ("0 0 1 1 *", datetime(2026, 6, 1, tzinfo=UTC), datetime(2027, 1, 1)),
        ("0 0 29 2 *", datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 2, 29)),
        ("30 9 * * 1-5", datetime(2026, 1, 2, 10, 0, tzinfo=UTC), datetime(2026, 1, 5, 9, 30)),
    ],
)
def test_next_fire_is_the_next_utc_occurrence(
    expression: str, after: datetime, expected: datetime
) -> None:
    fire = next_fire(expression, after)
    assert fire == expected.replace(tzinfo=UTC)
    assert fire.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "after",
    [datetime(2026, 9, 30, 2, 0, tzinfo=UTC), datetime(2026, 9, 30, 2, 0, 0, 1, tzinfo=UTC)],
    ids=["exactly-on", "just-after"],
)
def test_next_fire_is_strictly_after_the_given_time(after: datetime) -> None:
    assert next_fire("0 2 * * *", after) == datetime(2026, 10, 1, 2, 0, tzinfo=UTC)


def test_next_fire_interprets_the_expression_in_utc_whatever_the_input_zone() -> None:
    # 03:30 at +02:00 is 01:30 UTC: the next 02:00 UTC is half an hour later.
    after = datetime(2026, 9, 30, 3, 30, tzinfo=timezone(timedelta(hours=2)))
    fire = next_fire("0 2 * * *", after)
    assert fire == datetime(2026, 9, 30, 2, 0, tzinfo=UTC)
    assert fire.tzinfo is UTC


def test_next_fire_rejects_naive_times() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire("0 2 * * *", datetime(2026, 9, 30, 2, 0))


@pytest.mark.parametrize("expression", ["banana", "61 * * * *", "0 2 * *", "@daily"])
def test_next_fire_of_an_unparseable_expression_is_a_validation_error(expression: str) -> None:
    with pytest.raises(ValidationError, match="cron"):
        next_fire(expression, datetime(2026, 1, 1, tzinfo=UTC))


def test_validate_rejects_overlong_expressions() -> None:
    with pytest.raises(ValidationError, match="longer than"):
        validate("0 " + "1," * 150 + "2 * * *")
