"""Liveness and readiness: a small registry of checks that roles and the process assembly fill.

- **Liveness** (``/healthz`` on the metrics listener): "is this process still doing its job,
  or should an orchestrator restart it?" A liveness check is a cheap synchronous callable
  returning None when all is well, or a one-line problem (e.g. the executor's "no working
  consumer-group membership for 60 s"). Any problem makes ``/healthz`` answer 503.
- **Readiness** (``/readyz``): "do this process's dependencies answer right now?" A
  readiness check is an async callable that returns when the dependency answered and raises
  when it did not. Every check runs concurrently under one deadline (``timeout``); a check
  that has not returned by then fails as "timed out". Checks must be cancellable (a blocking
  driver call runs in an abandonable thread), so ``/readyz`` itself always answers in time.

Both endpoints answer a small JSON body naming each check: ``{"status": "ok"|"fail",
"checks": {"store": "ok", "kafka": "timed out after 1.0s"}}``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

log = logging.getLogger(__name__)

LivenessCheck = Callable[[], str | None]
ReadinessCheck = Callable[[], Awaitable[object]]

#: Default bound of one ``/readyz`` evaluation (every check runs within it, concurrently).
READY_TIMEOUT = 1.5

OK = "ok"


class Health:
    """The process's liveness and readiness checks, by name (a later registration of the
    same name replaces the earlier one)."""

    def __init__(self, *, timeout: float = READY_TIMEOUT) -> None:
        self.timeout = timeout
        self._liveness: dict[str, LivenessCheck] = {}
        self._readiness: dict[str, ReadinessCheck] = {}

    def add_liveness(self, name: str, check: LivenessCheck) -> None:
        """Register ``check``: None means alive, a string names the problem."""
        self._liveness[name] = check

    def add_readiness(self, name: str, check: ReadinessCheck) -> None:
        """Register ``check``: returning means ready, raising means not ready."""
        self._readiness[name] = check

    def remove(self, name: str) -> None:
        """Forget the checks registered under ``name`` (a role that stopped)."""
        self._liveness.pop(name, None)
        self._readiness.pop(name, None)

    def liveness(self) -> tuple[bool, dict[str, str]]:
        """(alive, check -> "ok" or its problem). A check that raises is a problem too."""
        results: dict[str, str] = {}
        for name, check in list(self._liveness.items()):
            try:
                problem = check()
            except Exception as exc:
                log.exception("liveness check raised", extra={"check": name})
                problem = f"check failed: {type(exc).__name__}"
            results[name] = OK if problem is None else problem
        return all(result == OK for result in results.values()), results

    async def readiness(self) -> tuple[bool, dict[str, str]]:
        """(ready, check -> "ok" or why not), within ``timeout`` seconds in all."""
        checks = list(self._readiness.items())
        results = {name: f"timed out after {self.timeout:g}s" for name, _ in checks}

        async def run(name: str, check: ReadinessCheck) -> None:
            try:
                await check()
            except Exception as exc:
                results[name] = _describe(exc)
                log.debug("readiness check failed", extra={"check": name, "error": str(exc)})
            else:
                results[name] = OK

        with trio.move_on_after(self.timeout):
            async with trio.open_nursery() as nursery:
                for name, check in checks:
                    nursery.start_soon(run, name, check)
        return all(result == OK for result in results.values()), results


def _describe(exc: Exception) -> str:
    """A one-line reason: the error's first line, bounded (it may name a host, never a
    secret: driver errors here come from ping-like calls that carry no credentials)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
