"""Elector adapters under contract test: every adapter runs the same test bodies.

Each adapter declares its capabilities; tests that need a capability are parametrised
only over the adapters that have it (never skipped):

- ``multi_candidate``: several candidates share one election (etcd), so "only one leads"
  and "a standby takes over" can be observed. The always-leader elector cannot.
- ``out_of_band_revoke``: the coordination service can end a term behind the leader's back
  (``LeaseRevoke`` from another client), as an operator or an expiry would.

The etcd adapter runs against a real etcd (``ETCD_ENDPOINTS``, default ``127.0.0.1:2379``)
and FAILS when it is unreachable. Every factory uses its own election name (a uuid).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

from jobscheduler.election import Elector, Term
from jobscheduler.election.etcd import EtcdElector
from jobscheduler.election.local import LocalElector
from tests.support.endpoints import etcd_endpoints as etcd_endpoints
from tests.support.etcd_admin import EtcdAdmin

#: Upper bound of one elector test.
TEST_BOUND = 30.0


@attrs.define
class ElectorFactory:
    """Makes started electors of one adapter, all in one fresh election; closes them."""

    kind: str
    multi_candidate: bool
    out_of_band_revoke: bool
    election: str
    make: Callable[[str, str, int], Elector]  # (election, candidate_id, ttl)
    admin: EtcdAdmin | None = None
    electors: list[Elector] = attrs.Factory(list)

    async def __call__(self, candidate_id: str = "a", *, ttl: int = 10) -> Elector:
        elector = self.make(self.election, candidate_id, ttl)
        await elector.start()
        self.electors.append(elector)
        return elector

    def require_admin(self) -> EtcdAdmin:
        assert self.admin is not None, f"{self.kind} has no out-of-band view"
        return self.admin

    async def revoke_out_of_band(self, term: Term) -> None:
        await self.require_admin().revoke(term.lease)

    async def leader(self) -> tuple[bytes, int, bytes] | None:
        """(key, creation revision, value) of the current leader, or None."""
        leader = await self.require_admin().leader(self.election)
        return None if leader is None else (leader.key, leader.revision, leader.value)


@attrs.frozen
class AdapterSpec:
    multi_candidate: bool
    out_of_band_revoke: bool


ADAPTERS: dict[str, AdapterSpec] = {
    "local": AdapterSpec(multi_candidate=False, out_of_band_revoke=False),
    "etcd": AdapterSpec(multi_candidate=True, out_of_band_revoke=True),
}


def _param(kind: str) -> Any:
    marks = [pytest.mark.integration] if kind == "etcd" else []
    return pytest.param(kind, id=kind, marks=marks)


def params_with(*capabilities: str) -> list[Any]:
    """Parameters for the adapters that have every one of ``capabilities``."""
    return [
        _param(kind)
        for kind, spec in ADAPTERS.items()
        if all(getattr(spec, capability) for capability in capabilities)
    ]


ADAPTER_PARAMS = params_with()


@asynccontextmanager
async def open_factory(kind: str) -> AsyncIterator[ElectorFactory]:
    spec = ADAPTERS[kind]
    election = f"jobscheduler-test/{uuid.uuid4().hex}"
    admin: EtcdAdmin | None = None
    if kind == "local":

        def make(election: str, candidate_id: str, ttl: int) -> Elector:
            return LocalElector(leader_id=candidate_id)

    elif kind == "etcd":
        endpoints = etcd_endpoints()
        admin = EtcdAdmin(endpoints)
        await admin.start()

        def make(election: str, candidate_id: str, ttl: int) -> Elector:
            return EtcdElector(endpoints, name=election, candidate_id=candidate_id, ttl=ttl)

    else:  # pragma: no cover
        raise AssertionError(kind)
    factory = ElectorFactory(
        kind=kind,
        multi_candidate=spec.multi_candidate,
        out_of_band_revoke=spec.out_of_band_revoke,
        election=election,
        make=make,
        admin=admin,
    )
    try:
        yield factory
    finally:
        with trio.CancelScope(shield=True):
            for elector in factory.electors:
                await elector.close()
            if admin is not None:
                await admin.close()


class RecordingElector(Elector):
    """Delegates to ``inner`` and records which primitives ``lead()`` used, in order."""

    def __init__(self, inner: Elector) -> None:
        self.inner = inner
        self.calls: list[tuple[str, Term | None]] = []

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def campaign(self) -> Term:
        term = await self.inner.campaign()
        self.calls.append(("campaign", term))
        return term

    async def watch(self, term: Term) -> None:
        self.calls.append(("watch", term))
        await self.inner.watch(term)

    async def resign(self, term: Term) -> None:
        self.calls.append(("resign", term))
        await self.inner.resign(term)


async def campaign_in_background(
    nursery: trio.Nursery, elector: Elector
) -> tuple[trio.Event, list[Term]]:
    """Start ``elector.campaign()``; the event fires (and the list holds the term) once won."""
    won = trio.Event()
    terms: list[Term] = []

    async def run() -> None:
        terms.append(await elector.campaign())
        won.set()

    nursery.start_soon(run)
    return won, terms
