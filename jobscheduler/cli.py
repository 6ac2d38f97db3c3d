"""``jobscheduler`` command line: dev, run-<role>, seed, loadtest, bench."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from functools import partial

import trio

from .app import embedded_deps, production_deps, run_roles
from .config import Settings
from .devlock import DevLock, StoreLocked
from .errors import ConfigError, JobSchedulerError
from .observability import configure_logging

ROLES = ("api", "scheduler", "executor", "reaper")

# Tool subcommands (name: help): each module jobscheduler.tools.<name> exposes
# ``configure(parser) -> None`` and ``run(args) -> int``. A tool's module is imported only
# when that tool runs, so the roles start without loading HTTP clients and the like.
TOOLS = {
    "seed": "insert a realistic mix of demo jobs straight into the configured store",
    "loadtest": "send jobs over HTTP at a target rate and report latency percentiles",
    "bench": "benchmark a fresh stack: `dev`, or one process per role (drain, delay, failover)",
}

log = logging.getLogger("jobscheduler")


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except ConfigError as exc:
        print(f"jobscheduler: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _dev(args: argparse.Namespace) -> int:
    settings = _settings()
    # The only executor of its file: refuse a second `dev`, and recover the jobs a previous
    # (dead) process left claimed/running at once instead of after CLAIM_TIMEOUT.
    lock = DevLock(settings.sqlite_path) if settings.sqlite_path != ":memory:" else None
    if lock is not None:
        try:
            lock.acquire()
        except StoreLocked as exc:
            print(f"jobscheduler: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"jobscheduler: cannot lock {lock.path}: {exc}", file=sys.stderr)
            return 2
    configure_logging(settings.log_level, settings.log_format, "dev")
    log.info(
        "starting jobscheduler dev",
        extra={"sqlite_path": settings.sqlite_path, "api_port": settings.api_port},
    )
    try:
        trio.run(
            partial(run_roles, recover_at_start=lock is not None),
            embedded_deps(settings),
            list(ROLES),
        )
    finally:
        if lock is not None:
            lock.release()
    return 0


def _role(role: str) -> int:
    settings = _settings()
    if role == "executor" and not settings.job_type:
        print(
            "jobscheduler: configuration error: JOB_TYPE: required for run-executor",
            file=sys.stderr,
        )
        return 2
    configure_logging(settings.log_level, settings.log_format, role)
    deps = production_deps(settings, role=role)
    if role == "executor" and settings.job_type not in deps.registry:
        print(
            f"jobscheduler: configuration error: JOB_TYPE: unknown job type {settings.job_type!r} "
            f"(known: {', '.join(deps.registry.names())})",
            file=sys.stderr,
        )
        return 2
    trio.run(run_roles, deps, [role])
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser; the tool named ``command`` (if any) gets its full argument set."""
    parser = argparse.ArgumentParser(
        prog="jobscheduler",
        description="Distributed one-off and cron job scheduler. Configuration comes from "
        "the environment (see README).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("dev", help="run every role in one process on SQLite (the embedded default)")
    for role in ROLES:
        sub.add_parser(f"run-{role}", help=f"run the {role} role on MongoDB/Kafka/etcd")
    for tool, help_text in TOOLS.items():
        tool_parser = sub.add_parser(tool, help=help_text, description=help_text)
        if tool == command:
            importlib.import_module(f"jobscheduler.tools.{tool}").configure(tool_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    try:
        if args.command == "dev":
            return _dev(args)
        if args.command.startswith("run-"):
            return _role(args.command.removeprefix("run-"))
        if args.command in TOOLS:
            result: int = importlib.import_module(f"jobscheduler.tools.{args.command}").run(args)
            return result
    except KeyboardInterrupt:
        return 130
    except JobSchedulerError as exc:
        print(f"jobscheduler: {exc}", file=sys.stderr)
        return 1
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    raise SystemExit(main())
