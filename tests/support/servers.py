"""Private etcd, Kafka and FerretDB servers for one test session, run by scripts/deps.sh.

The fault-injection suite freezes and kills its servers, so it never uses the shared ones
on the default ports: :class:`PrivateServers` starts a second instance of each on free
ports, with its own ``DEPS_DIR`` (data, logs, pid files), sharing the first instance's
built FerretDB binary and Kafka jars through ``DEPS_CACHE_DIR`` (default ``<repo>/.deps``,
which ``scripts/deps.sh up`` fills; the environment variable of that name overrides it).

Every signal goes to a pid read from this instance's pid file, and only after checking
that the process's command line names this instance's ``DEPS_DIR``: a signal can never
reach the shared servers.

The roles reach each server through a Toxiproxy link (:mod:`.toxiproxy`; Kafka advertises
the link's port), so a scenario can put a bad network between them; the tests' own checks
read the store directly (:attr:`Servers.check_mongo_uri`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import trio

from jobscheduler.testing import at_normal_priority, bindable, free_port

from .endpoints import Servers
from .toxiproxy import Link, Toxiproxy

ROOT = Path(__file__).resolve().parents[2]
DEPS_SH = ROOT / "scripts" / "deps.sh"
SERVICES = ("etcd", "kafka", "ferretdb")
#: Bound on Toxiproxy's start.
PROXY_TIMEOUT = 10.0
#: Bound on ``deps.sh up`` (Kafka's JVM start dominates: ~10-15 s on a busy 2-core box).
UP_TIMEOUT = 180.0
#: Bound on ``deps.sh down``.
DOWN_TIMEOUT = 90.0


def free_port_pair(taken: set[int]) -> int:
    """A port ``p`` such that ``p`` and ``p + 1`` are free (deps.sh uses ``p + 1`` for etcd's
    peer and Kafka's controller listener), clear of ``taken`` and of the default ports."""
    for _ in range(200):
        port = free_port()
        pair = {port, port + 1}
        if port + 1 < 65536 and not pair & taken and all(bindable(p) for p in pair):
            taken |= pair
            return port
    raise RuntimeError("no two consecutive free ports found")


class PrivateServers:
    """A second etcd, Kafka and FerretDB under ``deps_dir``, on free ports."""

    def __init__(self, deps_dir: Path, cache_dir: Path | None = None) -> None:
        self.deps_dir = deps_dir.resolve()
        default_cache = os.environ.get("DEPS_CACHE_DIR") or str(ROOT / ".deps")
        self.cache_dir = (cache_dir or Path(default_cache)).resolve()
        taken = {2379, 2380, 9092, 9093, 27017}
        self.etcd_port = free_port_pair(taken)
        self.kafka_port = free_port_pair(taken)
        self.mongo_port = free_port_pair(taken)
        self.frozen: set[str] = set()
        self.proxy = Toxiproxy(f"http://127.0.0.1:{free_port_pair(taken)}")
        #: The link in front of each server (what the roles connect to).
        self.links = {
            svc: Link(
                name=svc, listen=f"127.0.0.1:{free_port_pair(taken)}", upstream=f"127.0.0.1:{port}"
            )
            for svc, port in (
                ("etcd", self.etcd_port),
                ("kafka", self.kafka_port),
                ("ferretdb", self.mongo_port),
            )
        }
        self._proxy_process: subprocess.Popen[bytes] | None = None

    @property
    def servers(self) -> Servers:
        """Where the roles find the servers: through the links."""
        return Servers(
            mongo_uri=f"mongodb://{self.links['ferretdb'].listen}",
            kafka_brokers=self.links["kafka"].listen,
            etcd_endpoint=self.links["etcd"].listen,
            check_mongo_uri=f"mongodb://127.0.0.1:{self.mongo_port}",
        )

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DEPS_DIR": str(self.deps_dir),
            "DEPS_CACHE_DIR": str(self.cache_dir),
            "ETCD_PORT": str(self.etcd_port),
            "KAFKA_PORT": str(self.kafka_port),
            "KAFKA_ADVERTISED_PORT": str(self.links["kafka"].port),
            "MONGO_PORT": str(self.mongo_port),
        }

    def _deps(self, command: str, timeout: float) -> str:
        result = subprocess.run(
            at_normal_priority([str(DEPS_SH), command]),
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"deps.sh {command} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
            )
        return result.stdout

    # -- lifecycle (blocking: session set-up and teardown) ---------------------------------

    def up(self) -> str:
        """Start the proxy and its links (once), then whatever server is not running, and
        wait until every server answers through its link. If any of them fails to start,
        whatever did start is stopped before the error is raised (a session whose set-up
        failed runs no teardown)."""
        try:
            if self._proxy_process is None:
                self._start_proxy()
            return self._deps("up", UP_TIMEOUT)
        except BaseException:
            self.down()
            raise

    def down(self) -> str:
        """Stop all three (a frozen one is thawed first so that it can stop), and the proxy."""
        for svc in list(self.frozen):
            self.thaw(svc)
        try:
            return self._deps("down", DOWN_TIMEOUT)
        finally:
            if self._proxy_process is not None:
                self._proxy_process.terminate()
                self._proxy_process.wait(10)
                self._proxy_process = None

    def _start_proxy(self) -> None:
        host, port = self.proxy.api.removeprefix("http://").rsplit(":", 1)
        log = (self.deps_dir / "toxiproxy.log").open("ab")
        self._proxy_process = subprocess.Popen(
            at_normal_priority(
                [str(self.cache_dir / "bin" / "toxiproxy"), "-host", host, "-port", port]
            ),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

        async def links() -> None:
            with trio.fail_after(PROXY_TIMEOUT):
                while True:
                    try:
                        await self.proxy.version()
                        break
                    except httpx.TransportError:
                        await trio.sleep(0.05)
                for link in self.links.values():
                    await self.proxy.link(link.name, link.listen, link.upstream)

        trio.run(links)

    # -- faults ----------------------------------------------------------------------------

    def pid(self, svc: str) -> int:
        """The pid of this instance's ``svc``, checked against its command line."""
        assert svc in SERVICES, svc
        pid = int((self.deps_dir / svc / "pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        if f"{self.deps_dir}/{svc}/" not in cmdline:
            raise AssertionError(f"pid {pid} is not this instance's {svc}: {cmdline[:200]}")
        return pid

    def freeze(self, svc: str) -> None:
        """SIGSTOP: the server keeps its sockets open but answers nothing."""
        os.kill(self.pid(svc), signal.SIGSTOP)
        self.frozen.add(svc)

    def thaw(self, svc: str) -> None:
        os.kill(self.pid(svc), signal.SIGCONT)
        self.frozen.discard(svc)

    def kill(self, svc: str) -> None:
        """SIGKILL, and wait until the process is gone (its ports are then free)."""
        pid = self.pid(svc)
        os.kill(pid, signal.SIGKILL)
        self.frozen.discard(svc)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2:3]
            if state == ["Z"]:  # a zombie (its parent, setsid nohup, reaps it)
                break
            time.sleep(0.05)

    async def restart(self) -> float:
        """``deps.sh up`` (starts what is not running); returns the seconds it took."""
        started = time.monotonic()
        await trio.to_thread.run_sync(self.up)
        return time.monotonic() - started

    def log_tail(self, svc: str, lines: int = 40) -> str:
        path = self.deps_dir / svc / "log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])
