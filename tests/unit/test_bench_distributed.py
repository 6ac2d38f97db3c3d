"""The distributed bench's per-role cost report (commands and CPU per drained job)."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, generate_latest

from jobscheduler.store.mongo.commands import CommandCounter
from jobscheduler.tools.bench.distributed import RoleSample, cpu_seconds, parse_commands, report


def test_commands_are_read_back_from_a_role_s_metrics_text_by_name() -> None:
    registry = CollectorRegistry()
    counter = CommandCounter(registry)
    counter.commands.labels(command="update").inc(3)
    counter.commands.labels(command="find").inc(2)
    text = generate_latest(registry).decode()
    assert parse_commands(text) == {"update": 3.0, "find": 2.0}
    assert parse_commands("# nothing here\n") == {}


def test_the_report_divides_each_role_s_differences_by_the_jobs_drained() -> None:
    before = {
        "api": RoleSample(cpu=1.0, commands={"insert": 100.0}),
        "executor-noop": RoleSample(cpu=2.0, commands={"update": 10.0}),
        "scheduler-1": RoleSample(cpu=0.5, commands={}),
    }
    after = {
        "api": RoleSample(cpu=1.5, commands={"insert": 1100.0}),
        "executor-noop": RoleSample(cpu=4.0, commands={"update": 210.0, "find": 100.0}),
        "scheduler-1": RoleSample(cpu=1.0, commands={"find": 30.0, "update": 10.0}),
    }
    lines = report(before, after, 1000)
    assert lines[0].startswith("  api: 1.000 commands/job (insert 1.000); CPU 500 us/job")
    assert (
        "executor-noop: 0.300 commands/job (find 0.100, update 0.200); CPU 2000 us/job"
        in (lines[1])
    )
    # The API's inserts are the creates, not the drain: left out of the drain total.
    assert "drain roles together: 0.340 MongoDB commands/job (target <= 1.5)" in lines[-1]
    assert "CPU 2500 us/job" in lines[-1]


def test_cpu_seconds_of_this_process_grow_as_it_works() -> None:
    # The kernel counts CPU time in clock ticks (10 ms), so a short burst of work may not
    # move it: work in bursts until it moves, for at most about 2 s of work.
    first = cpu_seconds(os.getpid())
    for _ in range(100):
        sum(i * i for i in range(200_000))
        if cpu_seconds(os.getpid()) > first:
            break
    assert cpu_seconds(os.getpid()) > first
