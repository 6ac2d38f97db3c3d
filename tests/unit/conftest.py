"""Shared fixtures and helpers of the unit tests.

Roles and the API are built on the in-memory store (``store``: it passes the same contract
suite as SQLite and MongoDB), the in-process bus and the always-leader elector, with a clock
that follows trio's clock, so a test that asks for ``autojump_clock`` (pytest-trio's
``MockClock(autojump_threshold=0)``) runs in virtual time.

Nothing of that does real I/O: every store call is a trio checkpoint, so virtual time moves
only when every task waits for a deadline -- a sleep, a heartbeat, a timeout -- and then
straight to the next one. A role loop, the executor with its shielded outcome writes, or a
timeout under test all run in virtual time, exactly, however loaded the machine is.

Real time is for what does run outside trio: worker processes and thread handlers that
finish on their own (bounded by ``trio.fail_after``), and the tests of SQLite itself, which
take ``sqlite_store`` (its calls run in threads, and virtual time would leap while they
work). One thread is left in a role: ``run_executor`` shuts its worker-process pool down in
a thread as it exits, so a test bounds its wait for the role, not the role's exit.

Assertions are about outcomes and ordering; exact times only where nothing else runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from jobscheduler.bus.local import LocalBus
from jobscheduler.clock import Clock, TrioClock
from jobscheduler.config import Settings
from jobscheduler.election import Elector
from jobscheduler.election.local import LocalElector
from jobscheduler.handlers import HandlerRegistry, default_registry
from jobscheduler.observability.metrics import Metrics
from jobscheduler.roles.deps import Deps, Waker
from jobscheduler.store import JobStore
from jobscheduler.store.memory import MemoryJobStore
from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.testing import JobFactory

from .store_double import ProxyStore as ProxyStore

if TYPE_CHECKING:
    from .api_support import Api
    from .roles_support import ObservedBus

#: Wall time at trio time zero of every test that builds a clock with :func:`make_clock`.
BASE = datetime(2026, 1, 1, tzinfo=UTC)

#: The JSON of the default schedule settings (``CronPolicy()``): what a template created
#: without any reports.
DEFAULT_SCHEDULE_JSON: dict[str, str] = {
    "timezone": "UTC",
    "dstGap": "shift",
    "dstFold": "first",
    "catchUp": "one",
    "catchUpWindow": "1h",
    "overlap": "allow",
}


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Test settings: short, explicit values; anything can be overridden."""
    values: dict[str, Any] = {
        "sqlite_path": str(tmp_path / "jobs.db"),
        "worker_id": "worker-test",
        "scheduler_tick": 0.5,
        "claim_batch": 20,
        "queued_timeout": 30.0,
        "claim_timeout": 300.0,
        "reaper_interval": 30.0,
        "heartbeat_interval": 10.0,
        "executor_concurrency": 8,
        "shutdown_grace": 5.0,
    }
    values.update(overrides)
    return Settings(**values)


#: Jobs as the store would hold them (defaults: a pending noop due at BASE).
make_job = JobFactory(at=BASE)


def sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    """A metric's current value (0.0 when the labelled child was never touched)."""
    value = metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


@attrs.define(kw_only=True)
class DepsFactory:
    """Builds Deps around the test's store; every port can be swapped per call."""

    settings: Settings
    store: JobStore

    def __call__(
        self,
        *,
        store: JobStore | None = None,
        bus: LocalBus | None = None,
        registry: HandlerRegistry | None = None,
        settings: Settings | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        waker: bool = True,
        elector: Elector | None = None,
    ) -> Deps:
        clock = clock or make_clock()
        return Deps(
            settings=settings or self.settings,
            store=store or self.store,
            bus=bus if bus is not None else LocalBus(),
            elector=elector or LocalElector("leader-test"),
            registry=registry or default_registry(),
            metrics=metrics or Metrics(),
            clock=clock,
            waker=Waker(clock) if waker else None,
        )


def make_clock() -> TrioClock:
    """Wall time = BASE + trio time elapsed since now (call inside trio)."""
    return TrioClock(base=BASE)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
async def store() -> AsyncIterator[MemoryJobStore]:
    """A started in-memory store, closed after the test: the store of the unit tests (it
    passes the same contract suite as SQLite and MongoDB, and needs no thread)."""
    memory_store = MemoryJobStore()
    await memory_store.start()
    try:
        yield memory_store
    finally:
        await memory_store.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteJobStore]:
    """A started SQLite store on a fresh file, closed after the test: for the tests of what
    SQLite itself does."""
    sqlite = await started_sqlite(tmp_path / "jobs.db")
    try:
        yield sqlite
    finally:
        await sqlite.close()


async def started_sqlite(path: str | Path) -> SQLiteJobStore:
    """A SQLite store on ``path``, started (the caller closes it)."""
    sqlite = SQLiteJobStore(path)
    await sqlite.start()
    return sqlite


async def file_altered(path: Path, script: str) -> None:
    """A SQLite file at ``path`` made by today's store, then changed by ``script`` (to look
    as an older version left it)."""
    store = await started_sqlite(path)
    await store.close()
    conn = sqlite3.connect(path)
    try:
        conn.executescript(script)
    finally:
        conn.close()


@pytest.fixture
def make_deps(settings: Settings, store: JobStore) -> DepsFactory:
    return DepsFactory(settings=settings, store=store)


@pytest.fixture(params=["fast", "quart"])
async def api(make_deps: DepsFactory, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    """The app of the HTTP contract tests (``api_support.serve``), run once with each way in
    of ``POST /jobs``: ``[fast]`` (api/create.py's front) and ``[quart]`` (Quart alone).
    A test file that defines its own ``api`` uses that one instead."""
    from .api_support import api_deps, serve  # api_support imports this module

    async with serve(api_deps(make_deps), request.param) as served:
        yield served


@pytest.fixture
def observed(make_deps: DepsFactory) -> tuple[Deps, ObservedBus]:
    """Deps on an observed bus (``roles_support.ObservedBus``)."""
    from .roles_support import ObservedBus  # roles_support imports this module

    bus = ObservedBus()
    return make_deps(bus=bus), bus


@pytest.fixture
def long_tick(make_deps: DepsFactory, tmp_path: Path) -> tuple[Deps, ObservedBus]:
    """Deps on an observed bus whose scheduler ticks hourly: only the planned wake-ups of the
    dispatch loop publish within a test."""
    from .roles_support import ObservedBus  # roles_support imports this module

    bus = ObservedBus()
    return make_deps(bus=bus, settings=make_settings(tmp_path, scheduler_tick=3600.0)), bus


def after(seconds: float) -> datetime:
    """BASE + ``seconds``."""
    return BASE + timedelta(seconds=seconds)
