"""An out-of-band etcd client for tests: who leads an election, and revoking a lease."""

from __future__ import annotations

from typing import Any

import grpc
import trio

from jobscheduler._etcdpb import rpc_pb2, rpc_pb2_grpc, v3election_pb2, v3election_pb2_grpc


class EtcdAdmin:
    """An out-of-band etcd client: the election's current leader and lease revocation."""

    def __init__(self, endpoint: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        self._election = v3election_pb2_grpc.ElectionStub(self._channel)
        self._lease = rpc_pb2_grpc.LeaseStub(self._channel)

    async def leader(self, election: str) -> tuple[bytes, int, bytes] | None:
        """(key, lease id, value) of the election's leader, or None when there is none."""

        def call() -> Any:
            return self._election.Leader(
                v3election_pb2.LeaderRequest(name=election.encode()), timeout=3.0
            )

        try:
            response = await trio.to_thread.run_sync(call)
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.UNKNOWN and "no leader" in (exc.details() or ""):
                return None
            raise
        kv = response.kv
        return bytes(kv.key), int(kv.lease), bytes(kv.value)

    async def revoke(self, lease_id: int) -> None:
        await trio.to_thread.run_sync(
            lambda: self._lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=lease_id), timeout=3.0)
        )

    def close(self) -> None:
        self._channel.close()
