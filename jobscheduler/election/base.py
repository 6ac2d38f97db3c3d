"""The Elector port: who may dispatch. Losing leadership cancels the dispatch scope.

Adapters implement three primitives (campaign, watch, resign); :func:`lead` composes them
into the loop every scheduler runs. Every adapter passes
``tests/contract/test_elector_contract.py``.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from jobscheduler._scopes import shielded
from jobscheduler.errors import ElectionError

log = logging.getLogger(__name__)

RESIGN_TIMEOUT = 2.0
RETRY_DELAY = 1.0


@attrs.frozen(kw_only=True)
class Term:
    """One tenure as leader. ``token`` increases with every new term (etcd: the leader
    key's creation revision) and can fence writes."""

    leader_id: str
    token: int
    key: bytes = b""
    lease: int = 0


class Elector(abc.ABC):
    """Leader election among scheduler instances."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect. No I/O happens before this."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Disconnect (a held leadership ends with the session). Safe to call twice."""

    @abc.abstractmethod
    async def campaign(self) -> Term:
        """Block until this candidate is the leader. Cancellable: a cancelled campaign must
        leave no candidacy behind that could later win unnoticed. Raises ElectionError."""

    @abc.abstractmethod
    async def watch(self, term: Term) -> None:
        """Return (or raise ElectionError) as soon as ``term`` is lost or cannot be
        confirmed; otherwise run forever."""

    @abc.abstractmethod
    async def resign(self, term: Term) -> None:
        """Give up ``term`` so a standby takes over at once. Idempotent."""


LeaderWork = Callable[[Term], Awaitable[None]]


async def lead(
    elector: Elector,
    work: LeaderWork,
    *,
    on_leadership: Callable[[bool], None] = lambda leading: None,
) -> None:
    """Campaign forever; while leading, run ``work(term)`` inside a scope that is cancelled
    the moment ``watch`` reports the term lost. Resigns (shielded, bounded) on the way out.

    ``work`` returning normally ends the term too (it resigns and campaigns again).
    """
    while True:
        try:
            term = await elector.campaign()
        except ElectionError as exc:
            log.warning("election campaign failed", extra={"error": str(exc)})
            await trio.sleep(RETRY_DELAY)
            continue
        log.info("became leader", extra={"leader_id": term.leader_id, "term": term.token})
        on_leadership(True)
        lost = False
        try:
            async with trio.open_nursery() as nursery:

                async def watch_term(term: Term) -> None:
                    nonlocal lost
                    try:
                        await elector.watch(term)
                    except ElectionError as exc:
                        log.warning("leadership unconfirmed", extra={"error": str(exc)})
                    lost = True
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch_term, term)
                await work(term)
                nursery.cancel_scope.cancel()
        finally:
            on_leadership(False)
            with shielded(RESIGN_TIMEOUT):
                try:
                    await elector.resign(term)
                except ElectionError as exc:
                    log.warning("resign failed", extra={"error": str(exc)})
        if lost:
            log.warning("lost leadership; dispatch stopped", extra={"term": term.token})
            await trio.sleep(RETRY_DELAY)
