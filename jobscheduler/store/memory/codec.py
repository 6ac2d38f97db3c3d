"""How the memory store keeps values: copied in and out, times in whole milliseconds; and
its jobs table with the unique indexes every adapter has.

Pure, synchronous code (no trio): the async port methods live in the seam modules beside
this one and call into these tables between checkpoints, so each call is atomic.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

import attrs

from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.errors import StoreError
from jobscheduler.store.ends import EndCount, ended, step_of

T = TypeVar("T", bound=attrs.AttrsInstance)

#: Job fields holding caller-owned mutable JSON (a dict or list): copied on the way in and out.
_JSON_FIELDS = ("payload", "result")


def copy_json(value: Any) -> Any:
    """A copy of a JSON value sharing nothing mutable with ``value`` (other objects are
    deep-copied)."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    if kind in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)


def keep(value: T) -> T:
    """``value`` (a frozen attrs record) as the store keeps it: each datetime field
    truncated to whole milliseconds, which is what the SQLite and MongoDB adapters keep
    (:func:`~jobscheduler.domain.model.utc`)."""
    changes: dict[str, Any] = {}
    for field in attrs.fields(type(value)):
        current = getattr(value, field.name)
        if isinstance(current, datetime) and (kept := utc(current)) is not current:
            changes[field.name] = kept
    # The attrs plugin of mypy wants a concrete class for evolve, not a bound TypeVar.
    return attrs.evolve(value, **changes) if changes else value  # type: ignore[misc]


def insert_new(table: dict[str, T], key: str, value: T, what: str) -> T:
    """Store ``value`` (as :func:`keep` keeps it) under ``key``, a key ``table`` must not
    hold yet, and return it as stored; a taken key is a StoreError ("<what> id clash"), as
    a primary key is in the other adapters."""
    if key in table:
        raise StoreError(f"{what} id clash: {key}")
    table[key] = stored = keep(value)
    return stored


def job_in(job: Job) -> Job:
    """The job as stored: times in milliseconds, its payload and result the store's own."""
    job = keep(job)
    return attrs.evolve(job, payload=copy_json(job.payload), result=copy_json(job.result))


def job_out(job: Job) -> Job:
    """A stored job as handed to a caller: a copy whose payload and result are the caller's."""
    return attrs.evolve(job, payload=copy_json(job.payload), result=copy_json(job.result))


def value_in(field: str, value: Any) -> Any:
    """A value a Change writes or expects in ``field``, as the store compares and keeps it."""
    if isinstance(value, datetime):
        return utc(value)
    if field == "status" and value is not None:
        return Status(value)
    if field in _JSON_FIELDS:
        return copy_json(value)
    return value


RunKey = tuple[str, datetime]


class JobTable:
    """Every job by id, with the unique indexes of the real adapters.

    - (tenant id, idempotency key): one job per key in a tenant;
    - (template id, fire time): one cron run per fire time, whatever its key (jobs with
      both set, as a run has; others are not in it, like SQLite's partial index);
    - a flow-control slot (``key_slot``, ``type_slot``): held by one job at most.

    :meth:`add` and :meth:`replace` refuse a job that would break either index, so no
    caller can store two holders of one key.
    """

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._keys: dict[tuple[str, str], str] = {}
        self._runs: dict[RunKey, str] = {}
        self._slots: dict[str, str] = {}
        #: (tenant, status, job type) -> how many jobs: kept by every add, replace, remove.
        self.counters: Counter[tuple[str, Status, str]] = Counter()
        #: (tenant, step, status) -> how many jobs reached that end in that step
        #: (:mod:`jobscheduler.store.ends`): kept by every add and replace.
        self.ends: Counter[tuple[str, int, Status]] = Counter()

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[Job]:
        """The stored jobs (not copies: callers copy what they hand out)."""
        return iter(list(self._jobs.values()))

    def get(self, job_id: str, tenant: str | None = None) -> Job | None:
        """The job with this id (when ``tenant`` is given: if it is that tenant's)."""
        job = self._jobs.get(job_id)
        return job if job is not None and of_tenant(job, tenant) else None

    def holder(self, tenant_id: str, key: str) -> str | None:
        """The id of the job of ``tenant_id`` holding idempotency key ``key``."""
        return self._keys.get((tenant_id, key))

    def run(self, template_id: str, fire_at: datetime) -> Job | None:
        """The run of ``template_id`` for ``fire_at``."""
        job_id = self._runs.get((template_id, utc(fire_at)))
        return None if job_id is None else self._jobs[job_id]

    def slots(self) -> list[str]:
        """Every slot held."""
        return list(self._slots)

    def conflict(self, job: Job, *, replacing: str | None = None) -> str | None:
        """Which unique constraint storing ``job`` would break (``key``, ``run``, ``slot`` or
        ``id``, in that order: a job whose key or run is held is a duplicate, whatever its id), or
        None. ``replacing``: the id of the job it would replace (its own entries are no
        conflict)."""
        held = self._keys.get((job.tenant_id, job.idempotency_key))
        if held is not None and held != replacing:
            return "key"
        run = _run_key(job)
        if run is not None:
            held = self._runs.get(run)
            if held is not None and held != replacing:
                return "run"
        for slot in _slots_of(job):
            held = self._slots.get(slot)
            if held is not None and held != replacing:
                return "slot"
        if replacing is None and job.id in self._jobs:
            return "id"
        return None

    def add(self, job: Job) -> None:
        """Store a new job (already :func:`job_in`); ValueError if it breaks an index."""
        if (broken := self.conflict(job)) is not None:
            raise ValueError(f"unique index {broken} of job {job.id}")
        self._index(job)
        self._count_end(job, None)

    def replace(self, job: Job) -> None:
        """Store a new version of a job (same id); ValueError if it breaks an index."""
        old = self._jobs[job.id]
        if (broken := self.conflict(job, replacing=job.id)) is not None:
            raise ValueError(f"unique index {broken} of job {job.id}")
        self._unindex(old)
        self._index(job)
        self._count_end(job, old.status)

    def remove(self, job_id: str) -> Job | None:
        """Delete the job with this id; the job deleted, or None."""
        job = self._jobs.pop(job_id, None)
        if job is not None:
            self._unindex(job)
        return job

    def end_counts(self, tenant_id: str | None, first_step: int) -> list[EndCount]:
        """The counters of ends from ``first_step`` on, of a tenant (None: of all)."""
        return [
            (status, step, n)
            for (tenant, step, status), n in self.ends.items()
            if step >= first_step and (tenant_id is None or tenant == tenant_id)
        ]

    def forget_ends(self, before_step: int) -> int:
        """Drop the counters of ends of the steps before ``before_step``; how many."""
        old = [key for key in self.ends if key[1] < before_step]
        for key in old:
            del self.ends[key]
        return len(old)

    def _count_end(self, job: Job, old: Status | None) -> None:
        if ended(job.status, old):
            self.ends[(job.tenant_id, step_of(job.updated_at), job.status)] += 1

    def recount(self) -> Counter[tuple[str, Status, str]]:
        """The counters as a count of every job would have them."""
        return Counter((job.tenant_id, job.status, job.job_type) for job in self._jobs.values())

    def _unindex(self, old: Job) -> None:
        del self._keys[(old.tenant_id, old.idempotency_key)]
        if (run := _run_key(old)) is not None:
            del self._runs[run]
        for slot in _slots_of(old):
            del self._slots[slot]
        self.counters[(old.tenant_id, old.status, old.job_type)] -= 1

    def _index(self, job: Job) -> None:
        self.counters[(job.tenant_id, job.status, job.job_type)] += 1
        self._jobs[job.id] = job
        self._keys[(job.tenant_id, job.idempotency_key)] = job.id
        if (run := _run_key(job)) is not None:
            self._runs[run] = job.id
        for slot in _slots_of(job):
            self._slots[slot] = job.id


def _slots_of(job: Job) -> tuple[str, ...]:
    return tuple(slot for slot in (job.key_slot, job.type_slot) if slot is not None)


def of_tenant(job: Job, tenant: str | None) -> bool:
    """Whether ``job`` is ``tenant``'s (None: any tenant's)."""
    return tenant is None or job.tenant_id == tenant


def _run_key(job: Job) -> RunKey | None:
    if job.template_id is None or job.fire_at is None:
        return None
    return (job.template_id, job.fire_at)


def holds(job: Job, expect: Mapping[str, Any]) -> bool:
    """Whether ``job`` holds every expectation of a Change: a tuple is "any of these",
    None is "unset", anything else an equal value."""
    for field, expected in expect.items():
        current = getattr(job, field)
        if isinstance(expected, tuple):
            if not any(current == value_in(field, v) for v in expected):
                return False
        elif expected is None:
            if current is not None:
                return False
        elif current != value_in(field, expected):
            return False
    return True
