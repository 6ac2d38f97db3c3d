"""The fault-injection suite's fixtures: private servers for the session, a harness per test.

The private etcd, Kafka and FerretDB (tests/support/servers.py) start once per session on
free ports, because the scenarios freeze and kill them; the shared servers on the default
ports are never touched. Each test gets a :class:`Harness` over its own cluster (database,
topic prefix, election); whatever the test leaves frozen or stopped is thawed or restarted
before the next one.

On a loaded machine: ``FAULTS_CPU_BURNERS=8`` starts that many CPU-bound processes beside the
stack for the whole session, and ``FAULTS_RATE=40`` raises the scenarios' creates per second
(default 20). The suite must hold there exactly as on a quiet machine::

    FAULTS_CPU_BURNERS=8 FAULTS_RATE=40 .venv/bin/python -m pytest tests/faults
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from tests.support.cluster import open_cluster, pytest_runtest_makereport
from tests.support.servers import PrivateServers

from .harness import ROLE_ENV, Harness

__all__ = ["pytest_runtest_makereport"]

#: One summary line per scenario, shown again at the end of the run.
REPORT: list[str] = []


#: CPU-bound processes beside the stack, and creates per second, for a loaded run.
CPU_BURNERS = int(os.environ.get("FAULTS_CPU_BURNERS", "0"))
RATE = float(os.environ.get("FAULTS_RATE", "20"))


#: The test process's niceness while burners run: it measures the stack (a client's timeout,
#: a drain), so its own share of the CPU must not be what the measurement shows.
OBSERVER_NICENESS = -10


@pytest.fixture(scope="session", autouse=True)
def cpu_burners() -> Iterator[None]:
    """``FAULTS_CPU_BURNERS`` busy loops at normal priority for the session (none by default),
    beside the stack; the test process itself, the observer, runs at a higher priority when
    it may raise its own (as root)."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(CPU_BURNERS)
    ]
    if burners and os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, OBSERVER_NICENESS)
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@pytest.fixture(scope="session")
def private_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateServers]:
    servers = PrivateServers(tmp_path_factory.mktemp("deps"))
    servers.up()
    try:
        yield servers
    finally:
        servers.down()


@pytest.fixture
async def harness(
    tmp_path: Path, request: pytest.FixtureRequest, private_servers: PrivateServers
) -> AsyncIterator[Harness]:
    async with open_cluster(tmp_path, request, private_servers.servers, ROLE_ENV) as cluster:
        harness = Harness(cluster, private_servers, request.node.name, REPORT, rate=RATE)
        try:
            yield harness
        finally:
            with trio.CancelScope(shield=True):
                harness.thaw_all()
                for svc in list(private_servers.frozen):
                    private_servers.thaw(svc)
                await private_servers.restart()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORT:
        terminalreporter.section("fault scenarios")
        for line in REPORT:
            terminalreporter.write_line(line)
