"""``jobscheduler`` command line: dev, run-<role>, check, seed, loadtest, bench; jobs, cron and
stats over the HTTP API."""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import logging
import sys
from collections.abc import Sequence
from functools import partial

import attrs
import trio

from jobscheduler.api.serving.server import check_can_listen
from jobscheduler.config import Settings
from jobscheduler.errors import (
    AppLoadError,
    CannotListen,
    ConfigError,
    JobSchedulerError,
    StoreLocked,
)
from jobscheduler.handlers import HandlerRegistry
from jobscheduler.handlers.loading import describe, load_app, process_problem, resolve_job_types
from jobscheduler.observability.logs import configure_logging
from jobscheduler.process.assembly import embedded_deps, production_deps, run_roles
from jobscheduler.process.devlock import DevLock

ROLES = ("api", "scheduler", "executor", "reaper")

# Tool subcommands (name: help): each one's module (:data:`COMMAND_MODULES`) exposes
# ``configure(parser) -> None`` and ``run(args) -> int``. A tool's module is imported only
# when that tool runs, so the roles start without loading HTTP clients and the like.
TOOLS = {
    "seed": "insert a realistic mix of demo jobs straight into the configured store",
    "loadtest": "send jobs over HTTP at a target rate and report latency percentiles",
    "bench": "benchmark a fresh stack: `dev`, or one process per role (drain, delay, failover)",
    "keys": "create, list or revoke API keys in the configured store",
    "audit": "read the audit trail from the configured store",
    "retention": "show the retention of finished jobs, or set a tenant's, in the configured store",
}

# API commands, built on jobscheduler.client: the same protocol as TOOLS, each in
# jobscheduler.cli.<name>, imported only when it runs.
API_COMMANDS = {
    "jobs": "list, show, create, cancel and retry jobs over the HTTP API",
    "cron": "list, pause, resume, trigger, update, delete and preview cron templates",
    "stats": "counts by status and job type, queue lag and recent outcomes",
    "schedules": "make the store's cron templates match the schedules an app declares",
    "workflows": "create, show, list, cancel and retry workflows over the HTTP API",
    "flow": "read and change flow control: limits per job type and tenant, weights, held jobs",
    "webhooks": "add, list or remove failure-notification webhooks and read their deliveries",
}

log = logging.getLogger("jobscheduler")


COMMAND_MODULES = {
    "seed": "jobscheduler.cli.seed",
    "loadtest": "jobscheduler.tools.loadtest.main",
    "bench": "jobscheduler.tools.bench.main",
    "keys": "jobscheduler.cli.keys",
    "audit": "jobscheduler.cli.audit",
    "retention": "jobscheduler.cli.retention",
    "jobs": "jobscheduler.cli.jobs",
    "cron": "jobscheduler.cli.cron",
    "stats": "jobscheduler.cli.stats",
    "schedules": "jobscheduler.cli.schedules",
    "workflows": "jobscheduler.cli.workflows",
    "flow": "jobscheduler.cli.flow",
    "webhooks": "jobscheduler.cli.webhooks",
}


def _command_module(name: str) -> str:
    return COMMAND_MODULES[name]


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except ConfigError as exc:
        print(f"jobscheduler: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _app(args: argparse.Namespace, settings: Settings) -> str:
    """The app to load: ``--app`` wins over JOBSCHEDULER_APP."""
    return str(getattr(args, "app", None) or settings.app)


def auth_mode(settings: Settings, command: str) -> Settings:
    """AUTH's default: ``required`` for the production roles, ``off`` for ``dev``."""
    if "AUTH" in settings.configured:
        return settings
    return attrs.evolve(settings, auth="off" if command == "dev" else "required")


def dev_auth_problem(settings: Settings) -> str | None:
    """Why ``dev`` must not start (auth off on an address other hosts can reach), or None."""
    if settings.auth != "off" or is_loopback(settings.api_host):
        return None
    return (
        f"refusing to start: AUTH=off with API_HOST={settings.api_host} (not loopback) would "
        "let anyone on the network act as an admin; set AUTH=required or API_HOST=127.0.0.1"
    )


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _registry(app: str, settings: Settings) -> HandlerRegistry:
    """The built-ins plus the app's handlers; a load failure is one line and exit 2."""
    try:
        return load_app(app, settings)
    except AppLoadError as exc:
        print(f"jobscheduler: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _dev(args: argparse.Namespace) -> int:
    settings = auth_mode(_settings(), "dev")
    problem = dev_auth_problem(settings)
    if problem:
        print(f"jobscheduler: {problem}", file=sys.stderr)
        return 2
    app = _app(args, settings)
    registry = _registry(app, settings)
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
    try:
        check_listeners(settings, api=True)
    except CannotListen as exc:
        print(f"jobscheduler: {exc}", file=sys.stderr)
        if lock is not None:
            lock.release()
        return 2
    configure_logging(settings.log_level, settings.log_format, "dev")
    log.info(
        "starting jobscheduler dev",
        extra={
            "sqlite_path": settings.sqlite_path,
            "api_port": settings.api_port,
            "app": app or None,
            "job_types": ",".join(registry.names()),
        },
    )
    if settings.auth == "off":
        log.warning(
            "authentication is off (AUTH=off, the dev default): every caller is an admin of "
            "every tenant; set AUTH=required and create keys with `jobscheduler keys create`",
            extra={"api_host": settings.api_host},
        )
    try:
        sync_app = app if settings.sync_schedules and app else None
        trio.run(
            partial(run_roles, recover_at_start=lock is not None, sync_app=sync_app),
            embedded_deps(settings, registry),
            list(ROLES),
        )
    except (CannotListen, BaseExceptionGroup) as exc:
        return _start_up_failure(exc)
    finally:
        if lock is not None:
            lock.release()
    return 0


def check_listeners(settings: Settings, *, api: bool) -> None:
    """CannotListen if the metrics listener's address (and the API's, with ``api``) cannot
    be bound now: a busy port is one line before anything starts."""
    if api:
        check_can_listen(settings.api_host, settings.api_port, ("API_HOST", "API_PORT"))
    check_can_listen(settings.metrics_host, settings.metrics_port, ("METRICS_HOST", "METRICS_PORT"))


def _start_up_failure(exc: BaseException) -> int:
    """A run that ended because a listener could not bind (the port is taken...): its one
    line on stderr and exit 2, instead of trio's nested exception groups. Anything else is
    raised again."""
    error: BaseException | None = exc
    if isinstance(exc, BaseExceptionGroup):
        matched, rest = exc.split(CannotListen)
        # Only when nothing else went wrong: the first of the (nested) groups' errors.
        error = matched if rest is None else None
        while isinstance(error, BaseExceptionGroup):
            error = error.exceptions[0]
    if not isinstance(error, CannotListen):
        raise exc
    print(f"jobscheduler: {error}", file=sys.stderr)
    return 2


def _role(role: str, args: argparse.Namespace) -> int:
    settings = auth_mode(_settings(), role)
    if role == "executor" and not settings.job_type:
        print(
            "jobscheduler: configuration error: JOB_TYPE: required for run-executor "
            "(a job type, a comma list, or '*')",
            file=sys.stderr,
        )
        return 2
    # The scheduler and the reaper never call handlers: they need no app (the scheduler
    # loads it only to sync its schedules, with SYNC_SCHEDULES=1).
    needs_app = role in ("api", "executor") or (role == "scheduler" and settings.sync_schedules)
    app = _app(args, settings) if needs_app else ""
    registry = _registry(app, settings)
    if role == "executor":
        try:
            resolve_job_types(settings.job_type, registry)
        except AppLoadError as exc:
            print(f"jobscheduler: configuration error: {exc}", file=sys.stderr)
            return 2
    try:
        check_listeners(settings, api=role == "api")
    except CannotListen as exc:
        print(f"jobscheduler: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format, role)
    if app:
        log.info("app loaded", extra={"app": app, "job_types": ",".join(registry.names())})
    sync_app = app if role == "scheduler" and settings.sync_schedules and app else None
    try:
        trio.run(
            partial(run_roles, sync_app=sync_app),
            production_deps(settings, registry, role=role),
            [role],
        )
    except (CannotListen, BaseExceptionGroup) as exc:
        return _start_up_failure(exc)
    return 0


def _check(args: argparse.Namespace) -> int:
    """Load the app, list each job type with its options; non-zero exit on a problem."""
    settings = _settings()
    app = _app(args, settings)
    registry = _registry(app, settings)
    builtins = set(load_app(None, settings).names())
    problems = 0
    print(f"app {app}" if app else "no app given (--app or JOBSCHEDULER_APP): built-ins only")
    for name, line in zip(registry.names(), describe(registry), strict=True):
        handler = registry.get(name)
        note = "  (built-in)" if name in builtins else ""
        problem = process_problem(handler)
        if problem:
            problems += 1
            note += f"  PROBLEM: {problem}"
        print(f"  {line}{note}")
    if settings.job_type:
        try:
            resolve_job_types(settings.job_type, registry)
        except AppLoadError as exc:
            print(f"PROBLEM: {exc}")
            problems += 1
    if problems:
        print(f"{problems} problem(s)", file=sys.stderr)
        return 1
    print(f"ok: {len(registry.names())} job types")
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser; the tool named ``command`` (if any) gets its full argument set."""
    parser = argparse.ArgumentParser(
        prog="jobscheduler",
        description="Distributed one-off and cron job scheduler. Configuration comes from "
        "the environment (see docs/reference/configuration.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    app_help = (
        "your handlers: MODULE[:ATTRIBUTE] (attribute default 'registry', a HandlerRegistry; "
        "the current directory is importable); overrides JOBSCHEDULER_APP"
    )
    dev = sub.add_parser(
        "dev", help="run every role in one process on SQLite (the embedded default)"
    )
    dev.add_argument("--app", metavar="MODULE[:ATTRIBUTE]", help=app_help)
    for role in ROLES:
        role_parser = sub.add_parser(
            f"run-{role}", help=f"run the {role} role on MongoDB/Kafka/etcd"
        )
        role_parser.add_argument("--app", metavar="MODULE[:ATTRIBUTE]", help=app_help)
    check = sub.add_parser(
        "check",
        help="load an app and list its job types with their options (exit 1/2 on a problem)",
    )
    check.add_argument("--app", metavar="MODULE[:ATTRIBUTE]", help=app_help)
    for tool, help_text in {**TOOLS, **API_COMMANDS}.items():
        tool_parser = sub.add_parser(tool, help=help_text, description=help_text)
        if tool == command:
            importlib.import_module(_command_module(tool)).configure(tool_parser)
    return parser


def _api_command(args: argparse.Namespace) -> int:
    """Run a command of the HTTP API; an error answer is one line in the command's terms
    (the flags its module's ``FLAGS`` map the request fields to: ``--tenant is required``)."""
    from jobscheduler.cli import common  # the HTTP client: only for these commands

    module = importlib.import_module(_command_module(args.command))
    try:
        result: int = module.run(args)
    except JobSchedulerError as exc:
        flags = getattr(module, "FLAGS", {}).get(getattr(args, "action", None) or "", {})
        print(f"jobscheduler: {common.in_flags(str(exc), flags)}", file=sys.stderr)
        return 1
    return result


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    try:
        if args.command == "dev":
            return _dev(args)
        if args.command.startswith("run-"):
            return _role(args.command.removeprefix("run-"), args)
        if args.command == "check":
            return _check(args)
        if args.command in API_COMMANDS:
            return _api_command(args)
        if args.command in TOOLS:
            result: int = importlib.import_module(_command_module(args.command)).run(args)
            return result
    except KeyboardInterrupt:
        return 130
    except JobSchedulerError as exc:
        print(f"jobscheduler: {exc}", file=sys.stderr)
        return 1
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    raise SystemExit(main())
