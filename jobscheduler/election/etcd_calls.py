"""The etcd elector's building blocks (part of :class:`.etcd.EtcdElector`): its calls on
its own thread tokens, and the leases and leader key it grants, keeps alive, checks and
revokes through them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import trio

from jobscheduler._etcdpb import rpc_pb2
from jobscheduler.errors import ElectionError

from .base import Term
from .etcd_grpc import grpc_code, keep_alive, start_call, unary

#: Deadline of LeaseGrant and of the other short control calls.
RPC_TIMEOUT = 5.0
#: Deadline of each call that ends a candidacy or a term (Resign, LeaseRevoke).
REVOKE_TIMEOUT = 2.0


class EtcdCalls:
    """The RPCs and leases of an :class:`.etcd.EtcdElector`, which sets up this state."""

    _ttl: int
    _keepalive_interval: float
    _poll_interval: float
    _limiter: trio.CapacityLimiter
    _channel: Any
    _kv: Any
    _lease: Any
    _leases: set[int]

    def _require_started(self) -> None:
        if self._channel is None:
            raise ElectionError("etcd elector is not started (or already closed)")

    async def _grant(self) -> int:
        """A fresh lease of ``ttl`` for one campaign, tracked until revoked."""
        granted = await self._unary(
            self._lease.LeaseGrant,
            rpc_pb2.LeaseGrantRequest(TTL=self._ttl),
            deadline=RPC_TIMEOUT,
            what="LeaseGrant",
        )
        if granted.error or granted.ID == 0:
            raise ElectionError(f"etcd LeaseGrant refused: {granted.error or 'no lease id'}")
        lease_id = int(granted.ID)
        self._leases.add(lease_id)
        return lease_id

    async def _keep_alive(self, lease_id: int) -> str:
        """:func:`.etcd_grpc.keep_alive` of ``lease_id`` on this elector's thread tokens:
        the reason once the lease is gone (forgotten here then), ElectionError when a
        refresh is unconfirmed."""
        self._require_started()
        reason = await keep_alive(
            self._lease.LeaseKeepAlive,
            lease_id,
            interval=self._keepalive_interval,
            limiter=self._limiter,
        )
        self._leases.discard(lease_id)
        return reason

    async def _confirm_leader_key(self, term: Term) -> str:
        """Poll the leader key; return why once it no longer proves ``term``.

        The election's leader is the key with the lowest creation revision under the
        prefix, and revisions only grow: while our key exists with our creation revision
        and lease, no other key can lead.
        """
        while True:
            response = await self._unary(
                self._kv.Range,
                rpc_pb2.RangeRequest(key=term.key),
                deadline=self._keepalive_interval,
                what="Range",
            )
            if not response.kvs:
                return "leader key deleted"
            kv = response.kvs[0]
            if kv.create_revision != term.token or kv.lease != term.lease:
                return "leader key re-created"
            await trio.sleep(self._poll_interval)

    async def _revoke(self, lease_id: int) -> None:
        """Revoke ``lease_id`` (deleting its keys); a lease already gone is success."""
        try:
            await self._unary(
                self._lease.LeaseRevoke,
                rpc_pb2.LeaseRevokeRequest(ID=lease_id),
                deadline=REVOKE_TIMEOUT,
                what="LeaseRevoke",
            )
        except ElectionError as exc:
            if grpc_code(exc) is not grpc.StatusCode.NOT_FOUND:
                raise
        self._leases.discard(lease_id)

    async def _start_call(self, start: Callable[[], Any], what: str) -> Any:
        """:func:`.etcd_grpc.start_call` on this elector's thread tokens, once started."""
        self._require_started()
        return await start_call(start, what, limiter=self._limiter)

    async def _unary(self, method: Any, request: object, *, deadline: float, what: str) -> Any:
        """:func:`.etcd_grpc.unary` on this elector's thread tokens, once started."""
        self._require_started()
        return await unary(method, request, deadline=deadline, what=what, limiter=self._limiter)
