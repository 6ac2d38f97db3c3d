"""The production elector: etcd v3's own Election service, spoken over gRPC.

Stubs come from ``jobscheduler._etcdpb`` (generated from ``protos/etcd/``). grpc's Python
API is blocking: every call goes through :mod:`.etcd_grpc` with this elector's own
:class:`trio.CapacityLimiter` (threads, cancellation, and grpc errors as ElectionError).

Contract implemented (see :class:`EtcdElector`):

* ``campaign()`` grants a fresh lease (TTL ``ttl``) for every campaign and keeps it alive
  with ``LeaseKeepAlive`` in a nursery it owns for as long as it waits in ``Campaign``.
  When it returns, nothing it started is still running: the term's lease is then only kept
  alive by ``watch(term)``, which :func:`~jobscheduler.election.base.lead` calls at once. A
  caller that never watches loses the term after at most ``ttl`` seconds — fail-safe.
* A cancelled or failed campaign cancels the ``Campaign`` RPC (etcd then deletes the
  candidate key) and revokes the lease (shielded, at most ``REVOKE_TIMEOUT``), so no
  candidacy survives it. A campaign etcd does not answer in time is abandoned the same way
  and issued again on a fresh lease (and so a fresh key: the abandoned call's clean-up on
  the server cannot delete the new one's).
* ``watch(term)`` owns the term's keep-alive (one refresh every ``ttl/3`` s) and polls the
  leader key (``Range``, every ``min(ttl/10, 0.5)`` s). It returns when the term is
  definitely over (keep-alive TTL 0, leader key deleted or re-created) and raises
  :class:`~jobscheduler.errors.ElectionError` when it cannot be confirmed (no keep-alive
  answer within ``ttl/3`` s, any RPC error).
* ``resign(term)`` deletes the leader key (``Resign``) and revokes its lease, concurrently,
  each bounded by ``REVOKE_TIMEOUT``. A term that is already gone is not an error.
* ``close()`` revokes leases this elector still holds (bounded, shielded) and closes the
  channel, so a held leadership ends with the session rather than ``ttl`` seconds later.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
import trio

from jobscheduler._etcdpb import rpc_pb2_grpc, v3election_pb2, v3election_pb2_grpc
from jobscheduler._scopes import shielded
from jobscheduler.clock import Clock, SystemClock
from jobscheduler.errors import ConfigError, ElectionError

from .base import Elector, Term
from .etcd_calls import REVOKE_TIMEOUT, EtcdCalls
from .etcd_grpc import channel_target, deadline_exceeded, server_busy

log = logging.getLogger(__name__)

#: Threads this elector may occupy at once (stream reads, starting calls, closing).
THREAD_TOKENS = 8
#: A waiting ``Campaign`` is abandoned with its lease and issued again on a fresh one after
#: this long.
CAMPAIGN_DEADLINE = 300.0
#: Upper bound of the leader-key poll period, so an out-of-band revocation is seen in ~1 s.
MAX_POLL_INTERVAL = 0.5
#: Pause before a campaign is re-issued after etcd answered that it was too busy.
BUSY_PAUSE = 0.5
#: The channel's reconnect backoff: after a network fault heals, the next try comes within a
#: second (gRPC's own backoff grows to two minutes, so a long fault delayed the recovery).
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class _Reissue(Exception):
    """A campaign to issue again on a fresh lease (etcd did not answer it in time)."""


class EtcdElector(EtcdCalls, Elector):
    """Leader election through etcd's ``v3electionpb.Election`` service.

    ``endpoints`` are ``host:port`` strings (an ``http://`` prefix is accepted; TLS is not
    supported). Several IP-literal endpoints become one channel that fails over between
    them; with host names only the first is used. ``name`` is the election (the leader key
    is ``<name>/<lease id in hex>``), ``candidate_id`` the value proclaimed when winning and
    the :attr:`Term.leader_id`. ``ttl`` is the lease TTL in seconds: a leader that stops
    refreshing (crash, partition, freeze) is replaced after at most that long. ``clock``
    supplies the wall time logged with a term; all timing uses trio's clock.

    ``poll_interval`` (default ``min(ttl/10, 0.5)`` s) and ``campaign_deadline`` (default
    :data:`CAMPAIGN_DEADLINE`) tune how fast a lost term is noticed and how often a waiting
    campaign is re-issued.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        name: str,
        candidate_id: str,
        ttl: int = 10,
        clock: Clock | None = None,
        poll_interval: float | None = None,
        campaign_deadline: float = CAMPAIGN_DEADLINE,
    ) -> None:
        if ttl < 1:
            raise ConfigError(f"etcd election ttl must be at least 1 s, got {ttl}")
        if not name:
            raise ConfigError("etcd election name must not be empty")
        self._target = channel_target(endpoints)
        self._name = name
        self._candidate_id = candidate_id
        self._ttl = ttl
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._keepalive_interval = ttl / 3
        self._poll_interval = (
            poll_interval if poll_interval is not None else min(ttl / 10, MAX_POLL_INTERVAL)
        )
        self._campaign_deadline = campaign_deadline
        self._limiter = trio.CapacityLimiter(THREAD_TOKENS)
        self._channel: Any = None
        self._kv: Any = None
        self._lease: Any = None
        self._election: Any = None
        self._leases: set[int] = set()  # granted here, not yet known to be gone

    @property
    def _log_fields(self) -> dict[str, object]:
        return {"election": self._name, "candidate_id": self._candidate_id}

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the gRPC channel (it connects lazily, on the first call) and the stubs."""
        if self._channel is not None:
            await trio.lowlevel.checkpoint()
            return
        channel = await trio.to_thread.run_sync(
            functools.partial(grpc.insecure_channel, self._target, options=CHANNEL_OPTIONS),
            limiter=self._limiter,
        )
        self._channel = channel
        self._kv = rpc_pb2_grpc.KVStub(channel)
        self._lease = rpc_pb2_grpc.LeaseStub(channel)
        self._election = v3election_pb2_grpc.ElectionStub(channel)
        log.debug("etcd elector started", extra={**self._log_fields, "target": self._target})

    async def close(self) -> None:
        """Revoke the leases still held (shielded, bounded) and close the channel. Safe to
        call twice; RPCs still running in other tasks fail with ElectionError."""
        channel = self._channel
        if channel is None:
            await trio.lowlevel.checkpoint()
            return
        with shielded(REVOKE_TIMEOUT):
            for lease_id in sorted(self._leases):
                with contextlib.suppress(ElectionError):
                    await self._revoke(lease_id)
        self._channel = None
        self._kv = self._lease = self._election = None
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(channel.close, limiter=self._limiter)
        log.debug("etcd elector closed", extra=self._log_fields)

    # -- the Elector port -----------------------------------------------------------------

    async def campaign(self) -> Term:
        """Block until this candidate leads; return its term (``token`` = the leader key's
        creation revision, ``lease`` = the term's lease).

        The campaign's lease is kept alive while waiting; on return nothing started here
        is still running and ``watch(term)`` must follow to keep the term alive. Cancelled
        or failed, the campaign cancels its ``Campaign`` RPC and revokes its lease. (Only a
        cancellation during the initial ``LeaseGrant`` can leave a lease behind: one with no
        key, which expires after ``ttl``.) A ``Campaign`` etcd does not answer within
        ``campaign_deadline`` (or answers "too busy") is abandoned with its lease and issued
        again on a fresh one. Raises ElectionError when etcd fails or the lease is lost while
        waiting.
        """
        self._require_started()
        while True:
            lease_id = await self._grant()
            fields = {**self._log_fields, "lease": f"{lease_id:x}"}
            log.debug("campaigning", extra=fields)
            try:
                leader = await self._campaign_keeping_lease_alive(lease_id)
            except _Reissue:
                await self._abandon(lease_id, fields)
                continue
            except BaseException as exc:
                # debug: the caller (``lead``) reports a failure; a cancellation is expected
                log.debug("campaign ended without a win", extra={**fields, "reason": repr(exc)})
                await self._abandon(lease_id, fields)
                raise
            break
        term = Term(
            leader_id=self._candidate_id,
            token=int(leader.rev),
            key=bytes(leader.key),
            lease=int(leader.lease) or lease_id,
        )
        log.debug(
            "campaign won",
            extra={**fields, "term": term.token, "elected_at": self._clock.now().isoformat()},
        )
        return term

    async def watch(self, term: Term) -> None:
        """Keep ``term``'s lease alive and confirm the leader key until the term ends.

        Returns when the term is definitely over (lease expired or revoked, leader key
        deleted or re-created); raises ElectionError when it cannot be confirmed (no
        keep-alive answer within ttl/3, any RPC error). Runs forever while leading.
        """
        self._require_started()
        outcome: str | ElectionError = "watch ended"

        async with trio.open_nursery() as nursery:

            async def first_to_end(check: Callable[[], Any]) -> None:
                nonlocal outcome
                try:
                    outcome = await check()
                except ElectionError as exc:
                    outcome = exc
                nursery.cancel_scope.cancel()

            nursery.start_soon(first_to_end, functools.partial(self._keep_alive, term.lease))
            nursery.start_soon(first_to_end, functools.partial(self._confirm_leader_key, term))

        fields = {**self._log_fields, "term": term.token, "lease": f"{term.lease:x}"}
        if isinstance(outcome, ElectionError):
            log.warning("leadership unconfirmed", extra={**fields, "error": str(outcome)})
            raise outcome
        log.info("leadership lost", extra={**fields, "reason": outcome})

    async def resign(self, term: Term) -> None:
        """Delete the leader key and revoke the term's lease (concurrently, each bounded by
        REVOKE_TIMEOUT). Idempotent: a term already gone is fine. Raises ElectionError
        only if the lease may still exist (etcd unreachable, or closed before the lease
        could be revoked)."""
        if self._channel is None and term.lease not in self._leases:
            await trio.lowlevel.checkpoint()  # close() already ended it
            return
        self._require_started()
        revoke_error: ElectionError | None = None
        fields = {**self._log_fields, "term": term.token, "lease": f"{term.lease:x}"}

        async def resign_key() -> None:
            request = v3election_pb2.ResignRequest(
                leader=v3election_pb2.LeaderKey(
                    name=self._name.encode(), key=term.key, rev=term.token, lease=term.lease
                )
            )
            try:
                await self._unary(
                    self._election.Resign, request, deadline=REVOKE_TIMEOUT, what="Resign"
                )
            except ElectionError as exc:  # the revocation below settles the term anyway
                log.debug("resign rpc failed", extra={**fields, "error": str(exc)})

        async def revoke_lease() -> None:
            nonlocal revoke_error
            try:
                await self._revoke(term.lease)
            except ElectionError as exc:
                revoke_error = exc

        async with trio.open_nursery() as nursery:
            if term.key:
                nursery.start_soon(resign_key)
            if term.lease:
                nursery.start_soon(revoke_lease)
        if revoke_error is not None:
            raise revoke_error
        log.info("resigned", extra=fields)

    # -- the campaign's building blocks (the others: :class:`.etcd_calls.EtcdCalls`) -----

    async def _abandon(self, lease_id: int, fields: Mapping[str, Any]) -> None:
        """Revoke a campaign's lease (shielded, bounded): its candidate key goes with it."""
        with shielded(REVOKE_TIMEOUT):
            try:
                await self._revoke(lease_id)
            except ElectionError as revoke_exc:
                log.warning(
                    "could not revoke campaign lease; it expires within its ttl",
                    extra={**fields, "error": str(revoke_exc), "ttl": self._ttl},
                )

    async def _campaign_keeping_lease_alive(self, lease_id: int) -> Any:
        """Wait in ``Campaign`` while a sibling task keeps ``lease_id`` alive; whichever
        ends first cancels the other. Returns the won ``LeaderKey``."""
        request = v3election_pb2.CampaignRequest(
            name=self._name.encode(), lease=lease_id, value=self._candidate_id.encode()
        )
        leader: Any = None
        failure: ElectionError | _Reissue | None = None

        async with trio.open_nursery() as nursery:

            async def keep_alive() -> None:
                nonlocal failure
                try:
                    reason = await self._keep_alive(lease_id)
                    failure = ElectionError(f"campaign lease lost while waiting: {reason}")
                except ElectionError as exc:
                    failure = exc
                nursery.cancel_scope.cancel()

            nursery.start_soon(keep_alive)
            try:
                response = await self._unary(
                    self._election.Campaign,
                    request,
                    deadline=self._campaign_deadline,
                    what="Campaign",
                )
            except ElectionError as exc:
                # A campaign etcd did not answer in time is abandoned with its lease and
                # issued again on a fresh one. Re-joining on the same lease would reuse the
                # same key, which the abandoned call's clean-up on the server (a Resign)
                # can delete after the new call won.
                if deadline_exceeded(exc):
                    log.debug("campaign re-issued", extra=self._log_fields)
                    failure = _Reissue()
                elif server_busy(exc):
                    # etcd could not answer in time (a slow disk, a loaded machine): again
                    # after a pause, while the keep-alive, not this call, decides whether
                    # etcd is gone.
                    log.info(
                        "campaign re-issued after a transient etcd error",
                        extra={**self._log_fields, "error": str(exc)},
                    )
                    await trio.sleep(BUSY_PAUSE)
                    failure = _Reissue()
                else:
                    failure = exc
            else:
                leader = response.leader
            nursery.cancel_scope.cancel()

        if failure is not None:
            raise failure
        return leader
