"""An out-of-band etcd client for tests, independent of the electors under test: who leads
an election, how long a lease has left, and revoking a lease (ending a term behind the
leader's back, as an operator or an expiry would). The elector contract suite and the
integration tests share it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import grpc
import pytest
import trio

from jobscheduler._etcdpb import rpc_pb2, rpc_pb2_grpc, v3election_pb2, v3election_pb2_grpc
from jobscheduler.election.etcd_grpc import channel_target

#: Bound on each call to etcd.
ADMIN_TIMEOUT = 3.0


@attrs.frozen(kw_only=True)
class Leader:
    """An election's leader as etcd holds it: its key, its lease, the key's creation
    revision (a term's token) and its value (the candidate id)."""

    key: bytes
    lease: int
    revision: int
    value: bytes


class EtcdAdmin:
    """A second etcd client: :meth:`start` connects (and fails the test when etcd does not
    answer), :meth:`close` disconnects."""

    def __init__(self, endpoints: Sequence[str] | str) -> None:
        self._endpoints = endpoints
        self._channel: Any = None

    async def start(self) -> None:
        self._channel = grpc.insecure_channel(channel_target(self._endpoints))
        self._lease = rpc_pb2_grpc.LeaseStub(self._channel)
        self._election = v3election_pb2_grpc.ElectionStub(self._channel)
        try:
            await self.lease_ttl(1)
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

    async def leader(self, election: str) -> Leader | None:
        """The election's current leader, or None when there is none."""
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
        kv = response.kv
        return Leader(
            key=bytes(kv.key),
            lease=int(kv.lease),
            revision=int(kv.create_revision),
            value=bytes(kv.value),
        )

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
