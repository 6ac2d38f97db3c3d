"""``ctx.enqueue`` inside handlers: the executor stores the job itself, in the parent's
tenant, through the create's validation, under a key derived from the parent, so a retried
attempt enqueues nothing twice; from ``async def`` on trio, ``def`` in a thread, and ``def``
in a worker process through the executor's socket."""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Job
from jobscheduler.errors import ValidationError
from jobscheduler.handlers import JobContext, default_registry
from jobscheduler.handlers.children import ChildRequest, NoEnqueuer, RemoteEnqueuer
from jobscheduler.roles.executor.children import Children, child_key
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.executor.run import handler_logger
from jobscheduler.store.base import JobStore
from jobscheduler.store.query import JobQuery

from .conftest import DepsFactory, make_job
from .roles_support import REAL_BOUND, queue, registry_with, run_on_worker_processes, wake_up

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


async def jobs_of(store: JobStore, tenant: str) -> list[Job]:
    return await store.find_jobs(JobQuery(tenant_id=tenant), 100, None)


async def test_an_async_handler_enqueues_in_its_tenant_and_a_retry_enqueues_nothing_twice(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    seen: list[dict[str, Any]] = []

    async def fan_out(ctx: JobContext) -> None:
        seen.append(await ctx.enqueue_async("send-email", {"to": "a@example.com"}))
        seen.append(await ctx.enqueue_async("noop", name="audit", delay=60))
        if ctx.attempt == 1:
            raise RuntimeError("fails after enqueueing")

    registry = registry_with(fan_out=fan_out)
    registry.register("send-email", fan_out, validate=SCHEMA)
    deps = make_deps(registry=registry)
    parent = make_job(job_type="fan-out", tenant="acme", max_attempts=2)
    await queue(deps, store, parent)
    executor = Executor(deps)

    assert await executor.run(wake_up(parent)) == "retried"
    # The second attempt (its backoff skipped) makes the same calls.
    await store.claim_due(deps.clock.now() + timedelta(minutes=10), 10)
    assert await executor.run(wake_up(parent)) == "completed"
    assert len(seen) == 4
    assert [j["id"] for j in seen[2:]] == [j["id"] for j in seen[:2]]
    first, audit = seen[:2]
    assert first["tenantId"] == "acme"
    assert first["idempotencyKey"] == child_key(parent, "1")
    assert audit["idempotencyKey"] == child_key(parent, "audit")
    assert audit["scheduledAt"] > first["scheduledAt"]
    children = [j for j in await jobs_of(store, "acme") if j.id != parent.id]
    assert sorted(j.job_type for j in children) == ["noop", "send-email"]


async def test_a_repeated_attempt_gets_back_the_jobs_the_first_one_stored(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps(registry=registry_with())
    children = Children(deps)
    parent = make_job(job_type="noop", tenant="acme")
    first = children.open(parent)
    made = [await children.enqueue(first, ChildRequest(job_type="noop")) for _ in range(2)]
    children.close(first)
    again = children.open(parent)  # the next attempt makes the same calls
    remade = [await children.enqueue(again, ChildRequest(job_type="noop")) for _ in range(2)]
    assert [j["id"] for j in remade] == [j["id"] for j in made]
    assert len({j["id"] for j in made}) == 2
    assert len(await jobs_of(store, "acme")) == 2


async def test_a_bad_request_raises_the_creates_validation_error(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    registry = registry_with()
    registry.register("send-email", registry.get("noop").func, validate=SCHEMA)
    deps = make_deps(registry=registry)
    children = Children(deps)
    attempt = children.open(make_job(job_type="noop", tenant="acme"))
    with pytest.raises(ValidationError, match=r"^payload\.to: 42 is not of type 'string'$"):
        await children.enqueue(attempt, ChildRequest(job_type="send-email", payload={"to": 42}))
    with pytest.raises(ValidationError, match=r"^jobType: unknown job type 'nope'"):
        await children.enqueue(attempt, ChildRequest(job_type="nope"))
    children.close(attempt)
    with pytest.raises(ValidationError, match="attempt that made this context has ended"):
        await children.enqueue(attempt, ChildRequest(job_type="noop"))


async def test_a_def_handler_in_a_thread_enqueues_with_ctx_enqueue(
    make_deps: DepsFactory, store: JobStore
) -> None:
    # Real time: the handler runs in a real thread.
    def blocking(ctx: JobContext) -> None:
        ctx.enqueue("noop", name="child")

    registry = default_registry()
    registry.register("blocking", blocking, run_in="thread")
    deps = make_deps(registry=registry)
    parent = make_job(job_type="blocking", tenant="acme")
    await queue(deps, store, parent)
    with trio.fail_after(REAL_BOUND):
        assert await Executor(deps).run(wake_up(parent)) == "completed"
    (child,) = [j for j in await jobs_of(store, "acme") if j.id != parent.id]
    assert child.idempotency_key == child_key(parent, "child")


async def test_ctx_enqueue_in_an_async_handler_says_to_await_enqueue_async(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    async def wrong(ctx: JobContext) -> None:
        ctx.enqueue("noop")

    deps = make_deps(registry=registry_with(wrong=wrong))
    parent = make_job(job_type="wrong", max_attempts=1)
    await queue(deps, store, parent)
    assert await Executor(deps).run(wake_up(parent)) == "dlq"
    assert "use await ctx.enqueue_async" in str((await store.get(parent.id)).last_error)


def crunch_and_enqueue(ctx: JobContext) -> str:
    """A module-level def handler for the worker-process test."""
    return str(ctx.enqueue("noop", {"from": "worker"}, name="from-worker")["id"])


async def test_a_def_handler_in_a_worker_process_enqueues_through_the_executors_socket(
    make_deps: DepsFactory, store: JobStore
) -> None:
    registry = default_registry()
    registry.register("crunch", crunch_and_enqueue)
    deps = make_deps(registry=registry)
    parent = make_job(job_type="crunch", tenant="acme")
    await queue(deps, store, parent)
    assert await run_on_worker_processes(deps, parent) == "completed"
    done = await store.get(parent.id)
    (child,) = [j for j in await jobs_of(store, "acme") if j.id != parent.id]
    assert done.result == child.id
    assert child.payload == {"from": "worker"}
    assert child.idempotency_key == child_key(parent, "from-worker")


async def test_a_context_pickles_its_enqueuer_as_the_socket_and_token(
    make_deps: DepsFactory,
) -> None:
    children = Children(make_deps())
    attempt = children.open(make_job(job_type="noop"))
    job = make_job(job_type="noop")
    ctx = JobContext(
        job_id=job.id,
        tenant_id=job.tenant_id,
        job_type="noop",
        payload={},
        attempt=1,
        max_attempts=3,
        logger=handler_logger(job),
        enqueuer=attempt,
    )
    assert isinstance(pickle.loads(pickle.dumps(ctx)).enqueuer, NoEnqueuer)  # no socket yet
    children.path = "/tmp/x.sock"
    assert pickle.loads(pickle.dumps(ctx)).enqueuer == RemoteEnqueuer("/tmp/x.sock", attempt.token)
