"""``dev`` is the only executor of its SQLite file: an OS lock refuses a second
``dev`` on the same file, and holding it, ``dev`` recovers the previous process's
claimed/running jobs at start instead of after CLAIM_TIMEOUT."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobscheduler.bus.local import LocalBus
from jobscheduler.cli.main import main
from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.errors import StoreLocked
from jobscheduler.process.devlock import DevLock
from jobscheduler.roles.reaper.recovery import recover_in_flight
from jobscheduler.store import JobStore

from .conftest import BASE, DepsFactory, make_job, sample


def test_second_lock_on_the_same_file_is_refused_naming_the_holder(tmp_path: Path) -> None:
    database = tmp_path / "data" / "jobs.db"
    with DevLock(database) as first:
        assert first.path == tmp_path / "data" / "jobs.db.lock"
        with pytest.raises(StoreLocked, match=r"jobs\.db is already in use .*\(pid \d+\)"):
            DevLock(database).acquire()
        with DevLock(tmp_path / "other.db"):  # another file is another lock
            pass
    with DevLock(database):  # released: the next process gets it
        pass


def test_lock_of_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    database = tmp_path / "jobs.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from jobscheduler.process.devlock import DevLock; "
            f"DevLock({str(database)!r}).acquire(); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(StoreLocked, match=f"pid {holder.pid}"):
            DevLock(database).acquire()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    with DevLock(database):
        pass


def test_cli_dev_refuses_a_store_file_another_dev_holds_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "jobs.db"
    monkeypatch.setenv("SQLITE_PATH", str(database))
    with DevLock(database):
        assert main(["dev"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("jobscheduler: ")
    assert "already in use by another `jobscheduler dev`" in err[0]


async def test_start_up_recovery_fails_running_attempts_and_repends_claimed_jobs_uncounted(
    make_deps: DepsFactory, store: JobStore
) -> None:
    bus = LocalBus()
    deps = make_deps(bus=bus)
    running, claimed, last_try, pending, done = (
        make_job(key="running"),
        make_job(key="claimed"),
        make_job(key="last-try", attempts=2, max_attempts=3),
        make_job(key="pending"),
        make_job(key="done"),
    )
    for job in (running, claimed, last_try, pending, done):
        await store.insert(job)
    # A previous process claimed four jobs, started three, completed one, then died.
    now = BASE
    for job in (running, claimed, last_try, done):
        await store.claim_due(now, 10)
        assert await store.apply(states.pick(job.id, worker="old-pid-1", token=job.id, now=now))
    for job in (running, last_try, done):
        assert await store.apply(states.start(job.id, token=job.id, now=now))
    assert await store.apply(states.complete(await store.get(done.id), token=done.id, now=now))

    assert await recover_in_flight(deps) == 3

    # The running job's attempt (counted at its start) failed as lost; the claimed one never
    # started, so it goes back uncounted.
    for job, attempts in ((running, 1), (claimed, 0)):
        stored = await store.get(job.id)
        assert stored.status is Status.PENDING
        assert stored.attempts == attempts
        assert stored.claim_token is None
        assert stored.last_error is not None
        assert "previous process (old-pid-1) stopped" in stored.last_error
    assert "was running" in ((await store.get(running.id)).last_error or "")
    assert "was claimed" in ((await store.get(claimed.id)).last_error or "")
    dead = await store.get(last_try.id)
    assert (dead.status, dead.attempts) == (Status.DLQ, 3)
    assert [letter.job_id for letter in bus.dead_letters] == [last_try.id]
    assert (await store.get(pending.id)).status is Status.QUEUED  # queued: left to the reaper
    assert (await store.get(done.id)).status is Status.COMPLETED
    assert sample(deps.metrics, "reaper_recovered_jobs_total", {"sweep": "claimed"}) == 3
    assert await recover_in_flight(deps) == 0
