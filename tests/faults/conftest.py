"""The fault-injection suite's fixtures: private servers for the session, a harness per test.

The private etcd, Kafka and FerretDB (tests/support/servers.py) start once per session on
free ports, because the scenarios freeze and kill them; the shared servers on the default
ports are never touched. Each test gets a :class:`Harness` over its own cluster (database,
topic prefix, election); whatever the test leaves frozen or stopped is thawed or restarted
before the next one.
"""

from __future__ import annotations

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
        harness = Harness(cluster, private_servers, request.node.name, REPORT)
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
