"""What a drain costs each role of the distributed stack: MongoDB commands and CPU per job.

``jobscheduler bench --stack distributed`` samples every role process just before the burst
comes due and again once it has drained: the ``store_commands_total{command}`` counters from
each role's metrics endpoint (pymongo command monitoring, see
:mod:`jobscheduler.store.mongo.commands`) and the process's CPU time (user + system, from
psutil). The differences divided by the jobs drained are the figures: on a real deployment
every command is a network round trip, so commands per job, not the local FerretDB's speed,
decide the distributed throughput. CPU is the roles' own (FerretDB, Kafka and etcd are not
counted); the load average is printed beside it, as the machine may be shared.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence

import attrs
import psutil

from jobscheduler.testing import metric_samples

#: The command counter's samples.
COMMANDS = "store_commands_total"
#: The issue's target for the drain roles (scheduler, executor, reaper) together.
COMMANDS_PER_JOB_TARGET = 1.5


@attrs.frozen(kw_only=True)
class RoleSample:
    """One role process at one instant: its CPU seconds and store commands by name."""

    cpu: float
    commands: Mapping[str, float]


def parse_commands(metrics_text: str) -> dict[str, float]:
    """``store_commands_total`` by command name, from a Prometheus text exposition (none
    from a process that does not count them)."""
    try:
        samples = metric_samples(metrics_text, COMMANDS)
    except LookupError:
        return {}
    counts: dict[str, float] = {}
    for sample in samples:
        command = sample.labels["command"]
        counts[command] = counts.get(command, 0.0) + sample.value
    return counts


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children that have exited, in seconds."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system + times.children_user + times.children_system


async def sample(
    roles: Sequence[tuple[str, int, Callable[[], Awaitable[str]]]],
) -> dict[str, RoleSample]:
    """Sample each ``(name, pid, metrics text reader)``; a process gone is left out."""
    samples: dict[str, RoleSample] = {}
    for name, pid, read_metrics in roles:
        try:
            cpu = cpu_seconds(pid)
        except psutil.NoSuchProcess:
            continue
        samples[name] = RoleSample(cpu=cpu, commands=parse_commands(await read_metrics()))
    return samples


def _is_drain_role(name: str) -> bool:
    return not name.startswith("api")


def report(
    before: Mapping[str, RoleSample], after: Mapping[str, RoleSample], jobs: int
) -> list[str]:
    """The lines printed for a drain of ``jobs`` jobs between two samples: per role, CPU and
    commands per job (by command), then the drain roles together against the target."""
    lines: list[str] = []
    total_commands = 0.0
    total_cpu = 0.0
    for name in sorted(set(before) & set(after)):
        start, end = before[name], after[name]
        cpu = end.cpu - start.cpu
        by_command = {
            command: end.commands.get(command, 0.0) - start.commands.get(command, 0.0)
            for command in sorted(set(end.commands) | set(start.commands))
        }
        commands = sum(by_command.values())
        detail = ", ".join(f"{c} {n / jobs:.3f}" for c, n in by_command.items() if n) or "none"
        lines.append(
            f"  {name}: {commands / jobs:.3f} commands/job ({detail}); "
            f"CPU {cpu * 1e6 / jobs:.0f} us/job ({cpu:.2f}s)"
        )
        if _is_drain_role(name):
            total_commands += commands
            total_cpu += cpu
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines.append(
        f"  drain roles together: {total_commands / jobs:.3f} MongoDB commands/job "
        f"(target <= {COMMANDS_PER_JOB_TARGET}), CPU {total_cpu * 1e6 / jobs:.0f} us/job; "
        f"load average {load}"
    )
    return lines
