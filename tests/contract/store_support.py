"""Job builders shared by the JobStore contract suites (``tests/contract/test_store_*.py``
and their siblings) and by the Mongo integration tests: a fixed ``NOW``, ``make_job`` (the
package's job factory with this suite's defaults), ``running_job``, which walks a fresh
job through claim, pick and start, and ``dead``, a job in dlq after its only attempt failed;
and ``scheduler_deps``, what a scheduler needs to run over a store under test."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from jobscheduler.bus.local import LocalBus
from jobscheduler.clock import ManualClock
from jobscheduler.config import Settings
from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.election.local import LocalElector
from jobscheduler.handlers import default_registry
from jobscheduler.roles.deps import Deps
from jobscheduler.store import JobStore
from jobscheduler.testing import JobFactory

NOW = datetime(2026, 9, 29, 18, 0, 0, tzinfo=UTC)


#: Jobs created and due at NOW, with a nested payload: this suite's defaults for the
#: package's job factory.
make_job = JobFactory(at=NOW, payload={"n": 1, "nested": {"a": [1, 2]}})


async def running_job(store: JobStore, *, token: str = "tok-1", **kwargs: object) -> Job:
    job = await store.insert(make_job(**kwargs))  # type: ignore[arg-type]
    [queued] = await store.claim_due(NOW, 10)
    assert queued.id == job.id
    claimed = await store.apply(states.pick(job.id, worker="w1", token=token, now=NOW))
    assert claimed is not None
    running = await store.apply(states.start(claimed.id, token=token, now=NOW))
    assert running is not None
    return running


async def dead(store: JobStore, **kwargs: object) -> Job:
    """A job in dlq after its only attempt failed."""
    job = await running_job(store, max_attempts=1, **kwargs)  # type: ignore[arg-type]
    failed = await store.apply(states.fail(job, token="tok-1", now=NOW, error="boom"))
    assert failed is not None
    assert failed.status is Status.DLQ
    return failed


def scheduler_deps(store: JobStore, clock: ManualClock, tmp_path: Path, name: str) -> Deps:
    """A scheduler's ports over ``store`` on ``clock``: a local bus, and a local elector
    that makes ``name`` (also the worker id) the leader."""
    return Deps(
        settings=Settings(sqlite_path=str(tmp_path / "unused.db"), worker_id=name),
        store=store,
        bus=LocalBus(),
        elector=LocalElector(name),
        registry=default_registry(),
        clock=clock,
    )
