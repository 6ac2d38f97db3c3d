"""Process assembly: build the adapters for a deployment and run roles in one nursery tree.

``dev`` runs every role on the embedded adapters (SQLite, in-process bus, always-leader).
``run-<role>`` runs one role on the production adapters (MongoDB, Kafka, etcd). Adapter
modules are imported here only, so roles never know which adapters they hold.
"""

from __future__ import annotations

import gc
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import trio

from jobscheduler._scopes import shielded
from jobscheduler.api import run_api
from jobscheduler.bus import Bus
from jobscheduler.clock import SystemClock
from jobscheduler.config import Settings
from jobscheduler.election import Elector
from jobscheduler.errors import StoreError
from jobscheduler.handlers import HandlerRegistry
from jobscheduler.handlers.loading import load_app, resolve_job_types
from jobscheduler.observability.metrics import Metrics
from jobscheduler.observability.tracing import configure_tracing
from jobscheduler.roles.deps import Deps, Waker
from jobscheduler.roles.executor.role import run_executor
from jobscheduler.roles.executor.slots import messages_held
from jobscheduler.roles.notifier.loop import run_notifier
from jobscheduler.roles.reaper.recovery import recover_in_flight
from jobscheduler.roles.reaper.sweeps import run_reaper
from jobscheduler.roles.scheduler.loop import run_scheduler
from jobscheduler.store import JobStore

from .metrics_server import run_metrics_server

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0


def embedded_deps(settings: Settings, registry: HandlerRegistry | None = None) -> Deps:
    from jobscheduler.bus.local import LocalBus
    from jobscheduler.election.local import LocalElector
    from jobscheduler.store.sqlite import SQLiteJobStore

    clock = SystemClock()
    return Deps(
        settings=settings,
        store=SQLiteJobStore(settings.sqlite_path),
        bus=LocalBus(),
        elector=LocalElector(settings.worker_id),
        registry=registry if registry is not None else load_app(settings.app, settings),
        metrics=Metrics(),
        clock=clock,
        waker=Waker(clock),
        tracing=configure_tracing(settings, role="dev"),
    )


def production_store(settings: Settings, metrics: Metrics | None = None) -> JobStore:
    """The MongoDB store; with ``metrics``, its commands are counted there
    (``store_commands_total{command}``), and so are the create audit records it could not
    write (``api_audit_write_failures_total``)."""
    from jobscheduler.store.mongo import MongoJobStore
    from jobscheduler.store.mongo.commands import CommandCounter

    if metrics is None:
        return MongoJobStore(settings.mongo_uri, settings.mongo_db)
    return MongoJobStore(
        settings.mongo_uri,
        settings.mongo_db,
        event_listeners=[CommandCounter(metrics.registry)],
        on_audit_failure=metrics.api_audit_failures.inc,
    )


def production_bus(settings: Settings) -> Bus:
    from jobscheduler.bus.kafka import KafkaBus

    return KafkaBus(
        settings.kafka_brokers,
        partitions=settings.kafka_partitions,
        topic_prefix=settings.kafka_topic_prefix,
        # As many un-acked as the executor holds: fewer would cap EXECUTOR_CONCURRENCY.
        max_in_flight_per_subscription=messages_held(settings.executor_concurrency),
        rejoin_timeout=settings.kafka_rejoin_timeout,
        unhealthy_after=settings.kafka_unhealthy_after,
    )


def production_elector(settings: Settings) -> Elector:
    from jobscheduler.election.etcd import EtcdElector

    return EtcdElector(
        settings.etcd_endpoints,
        name=settings.election_name,
        candidate_id=settings.worker_id,
        ttl=settings.election_ttl,
    )


def production_deps(
    settings: Settings, registry: HandlerRegistry | None = None, *, role: str
) -> Deps:
    """Adapters for one production role; a role gets real connections only to what it uses."""
    from jobscheduler.bus.local import LocalBus
    from jobscheduler.election.local import LocalElector

    from .probes import etcd_probe, kafka_probe

    needs_bus = role in ("scheduler", "executor", "reaper")
    metrics = Metrics()
    deps = Deps(
        settings=settings,
        store=production_store(settings, metrics),
        bus=production_bus(settings) if needs_bus else LocalBus(),
        elector=production_elector(settings) if role == "scheduler" else LocalElector(),
        registry=registry if registry is not None else load_app(settings.app, settings),
        metrics=metrics,
        clock=SystemClock(),
        waker=None,
        tracing=configure_tracing(settings, role=role),
    )
    # Readiness of what this role talks to besides its store (registered by run_roles).
    probe_timeout = deps.health.timeout
    if needs_bus:
        deps.health.add_readiness(
            "kafka", kafka_probe(settings.kafka_brokers, timeout=probe_timeout)
        )
    if role == "scheduler":
        deps.health.add_readiness(
            "etcd", etcd_probe(settings.etcd_endpoints, timeout=probe_timeout)
        )
    return deps


@asynccontextmanager
async def started(deps: Deps) -> AsyncIterator[Deps]:
    """Start the adapters; close them (shielded, bounded) however the block ends."""
    closers: list[Callable[[], Awaitable[None]]] = []
    try:
        for port in (deps.store, deps.bus, deps.elector):
            await port.start()
            closers.append(port.close)
        yield deps
    finally:
        with shielded(CLOSE_TIMEOUT):
            for close in reversed(closers):
                try:
                    await close()
                except Exception:
                    log.exception("error while closing an adapter")
            if deps.tracing.enabled:
                # The spans still buffered are exported (a blocking call of the SDK's).
                await trio.to_thread.run_sync(deps.tracing.shutdown, abandon_on_cancel=True)


async def _stop_on_signals(
    stop: Callable[[bool], None], *, task_status: trio.TaskStatus[None]
) -> None:
    """First SIGINT/SIGTERM: graceful stop. A second one: stop now."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        force = False
        async for signum in signals:
            name = signal.Signals(signum).name
            log.info("forcing shutdown" if force else "shutting down", extra={"signal": name})
            stop(force)
            force = True


def settle_heap() -> None:
    """Move everything allocated so far out of the garbage collector's generations.

    Once the roles are up, what exists (modules, the app, each role's long-lived state)
    lives as long as the process, yet every full collection walked all of it again: on
    ``dev``, each one took about 45 ms, and a burst of 5,000 jobs set off five of them. After
    ``gc.freeze`` a full collection walks only what came later (5 in that burst: 48 ms in
    all, instead of 220-290 ms). Garbage of the start-up is collected first, so none of it
    is kept."""
    gc.collect()
    gc.freeze()


async def run_roles(
    deps: Deps,
    roles: list[str],
    *,
    with_signals: bool = True,
    recover_at_start: bool = False,
    sync_app: str | None = None,
) -> None:
    """Start the adapters, the metrics listener and ``roles``; run until a signal or
    cancellation, then close the adapters.

    ``recover_at_start`` (``dev``, which holds the lock on its store file and so is its only
    executor): before any role starts, recover every claimed/running job of the previous
    process at once (:func:`recovery.recover_in_flight`) instead of after CLAIM_TIMEOUT.

    ``sync_app`` (the scheduler with SYNC_SCHEDULES=1 and ``--app``): once the roles are
    up, sync that app's schedules (:mod:`jobscheduler.process.schedules`); a failure is
    logged, not fatal.

    Shutdown order on a signal: the API, scheduler and reaper stop at once; executors stop
    receiving and get SHUTDOWN_GRACE to finish running handlers (then hand the jobs back);
    then the adapters close (the elector resigns as the scheduler stops).
    """
    settings = deps.settings
    drain = trio.Event()
    front = trio.CancelScope()
    workers = trio.CancelScope()

    def stop(force: bool) -> None:
        drain.set()
        front.cancel()
        if force:
            workers.cancel()

    async with trio.open_nursery() as outer:
        if with_signals:
            await outer.start(_stop_on_signals, stop)
        async with started(deps):
            deps.health.add_readiness("store", deps.store.ping)
            if recover_at_start:
                try:
                    recovered = await recover_in_flight(deps)
                except StoreError as exc:
                    log.error("start-up recovery failed", extra={"error": str(exc)})
                else:
                    log.info("start-up recovery done", extra={"recovered": recovered})
            bound = await outer.start(
                partial(run_metrics_server, health=deps.health),
                deps.metrics,
                settings.metrics_host,
                settings.metrics_port,
            )
            log.info("metrics listening", extra={"addresses": bound})
            with workers:
                async with trio.open_nursery() as workers_nursery:
                    if "executor" in roles:
                        job_types = (
                            resolve_job_types(settings.job_type, deps.registry)
                            if settings.job_type
                            else deps.registry.names()
                        )
                        executor = await workers_nursery.start(run_executor, deps, job_types, drain)
                        # /healthz fails while a consumer has no working group membership.
                        deps.health.add_liveness("executor", executor.liveness_problem)
                    with front:
                        async with trio.open_nursery() as front_nursery:
                            if "reaper" in roles:
                                await front_nursery.start(run_reaper, deps)
                                # Webhook deliveries go out from the reaper's process.
                                await front_nursery.start(run_notifier, deps)
                            if "scheduler" in roles:
                                await front_nursery.start(run_scheduler, deps)
                            api_url = None
                            if "api" in roles:
                                addresses = await front_nursery.start(run_api, deps)
                                log.info("api listening", extra={"addresses": addresses})
                                if addresses:  # hypercorn's binds: http://host:port
                                    api_url = addresses[0]
                                    if "://" not in api_url:
                                        api_url = f"http://{api_url}"
                            if sync_app and "scheduler" in roles:
                                # Imported here: other roles never load the HTTP client.
                                from .schedules import sync_at_start

                                front_nursery.start_soon(
                                    sync_at_start, deps.registry, sync_app, api_url
                                )
                            settle_heap()
                            log.info("ready", extra={"roles": ",".join(roles)})
                            # An executor-only process has nothing in this nursery: hold it
                            # open until a signal (or cancellation) ends the front roles.
                            await trio.sleep_forever()
                    drain.set()
        log.info("stopped", extra={"roles": ",".join(roles)})
        outer.cancel_scope.cancel()
