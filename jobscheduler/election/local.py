"""The always-leader elector of the single-process deployment."""

from __future__ import annotations

import trio

from .base import Elector, Term


class LocalElector(Elector):
    """One process, one candidate: it leads at once and never loses the term."""

    def __init__(self, leader_id: str = "local") -> None:
        self._leader_id = leader_id
        self._terms = 0

    async def start(self) -> None:
        await trio.lowlevel.checkpoint()

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()

    async def campaign(self) -> Term:
        await trio.lowlevel.checkpoint()
        self._terms += 1
        return Term(leader_id=self._leader_id, token=self._terms)

    async def watch(self, term: Term) -> None:
        await trio.sleep_forever()

    async def resign(self, term: Term) -> None:
        await trio.lowlevel.checkpoint()
