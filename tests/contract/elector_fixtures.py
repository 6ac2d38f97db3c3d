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

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import grpc
import pytest
import trio

from jobscheduler._etcdpb import rpc_pb2, rpc_pb2_grpc, v3election_pb2, v3election_pb2_grpc
from jobscheduler.election import Elector, Term
from jobscheduler.election.etcd import EtcdElector
from jobscheduler.election.etcd_grpc import channel_target
from jobscheduler.election.local import LocalElector

ADMIN_TIMEOUT = 3.0


def etcd_endpoints() -> list[str]:
    return [e for e in os.environ.get("ETCD_ENDPOINTS", "127.0.0.1:2379").split(",") if e]


class EtcdAdmin:
    """A second etcd client, independent of the electors: sees and ends terms out of band."""

    def __init__(self, endpoints: list[str]) -> None:
        self._endpoints = endpoints
        self._channel: Any = None

    async def start(self) -> None:
        self._channel = grpc.insecure_channel(channel_target(self._endpoints))
        self._lease = rpc_pb2_grpc.LeaseStub(self._channel)
        self._election = v3election_pb2_grpc.ElectionStub(self._channel)
        try:
            await self._call(
                lambda: self._lease.LeaseTimeToLive(
                    rpc_pb2.LeaseTimeToLiveRequest(ID=1), timeout=ADMIN_TIMEOUT
                )
            )
        except grpc.RpcError as exc:
            await self.close()
            pytest.fail(
                f"etcd is not reachable at {self._endpoints} (ETCD_ENDPOINTS); "
                f"start it with scripts/deps.sh up: {exc}"
            )

    async def close(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await trio.to_thread.run_sync(channel.close)

    async def _call(self, fn: Callable[[], Any]) -> Any:
        return await trio.to_thread.run_sync(fn)

    async def leader(self, election: str) -> tuple[bytes, int, bytes] | None:
        """(key, creation revision, value) of the current leader, or None."""
        try:
            response = await self._call(
                lambda: self._election.Leader(
                    v3election_pb2.LeaderRequest(name=election.encode()), timeout=ADMIN_TIMEOUT
                )
            )
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.UNKNOWN and "no leader" in (exc.details() or ""):
                return None
            raise
        return bytes(response.kv.key), int(response.kv.create_revision), bytes(response.kv.value)

    async def lease_ttl(self, lease_id: int) -> int:
        """Remaining TTL in seconds; -1 once the lease is gone."""
        response = await self._call(
            lambda: self._lease.LeaseTimeToLive(
                rpc_pb2.LeaseTimeToLiveRequest(ID=lease_id), timeout=ADMIN_TIMEOUT
            )
        )
        return int(response.TTL)

    async def revoke(self, lease_id: int) -> None:
        await self._call(
            lambda: self._lease.LeaseRevoke(
                rpc_pb2.LeaseRevokeRequest(ID=lease_id), timeout=ADMIN_TIMEOUT
            )
        )


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
        return await self.require_admin().leader(self.election)


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
