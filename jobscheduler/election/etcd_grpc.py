"""The gRPC plumbing of the etcd elector: trio calls into grpc's blocking Python API.

Every call leaves trio through ``trio.to_thread.run_sync`` with the caller's own
:class:`trio.CapacityLimiter`, so a long read (the keep-alive stream) never takes a token
from the default thread pool that the stores and the bus share. Unary calls are started as
grpc futures in such a thread and awaited without holding one: the future's done-callback
wakes a :class:`trio.Event`, and trio cancellation cancels the RPC itself (never an
abandoned blocking call that could go on to win an election). grpc's errors become
:class:`~jobscheduler.errors.ElectionError` here, their status code kept as the cause
(:func:`grpc_code`).
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import queue
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import grpc
import trio

from jobscheduler._etcdpb import rpc_pb2
from jobscheduler.errors import ConfigError, ElectionError

log = logging.getLogger(__name__)


async def start_call(start: Callable[[], Any], what: str, *, limiter: trio.CapacityLimiter) -> Any:
    """Start a grpc call (future or stream) in a thread. Shielded: it returns at once,
    and a call started but never handed back could not be cancelled."""
    with trio.CancelScope(shield=True):
        try:
            return await trio.to_thread.run_sync(start, limiter=limiter)
        except grpc.RpcError as exc:
            raise election_error(what, exc) from exc
        except ValueError as exc:  # "Cannot invoke RPC on closed channel!"
            raise ElectionError(f"etcd {what}: {exc}") from exc


async def unary(
    method: Any, request: object, *, deadline: float, what: str, limiter: trio.CapacityLimiter
) -> Any:
    """Run one unary call with a deadline, holding no thread while it is in flight.
    Cancellation cancels the RPC."""
    future = await start_call(
        functools.partial(method.future, request, timeout=deadline), what, limiter=limiter
    )
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()

    def wake(_: object) -> None:  # runs in a grpc thread (or here, if already done)
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(done.set)

    future.add_done_callback(wake)
    try:
        await done.wait()
    finally:
        future.cancel()  # no-op once done
    try:
        return future.result()
    except grpc.RpcError as exc:
        raise election_error(what, exc) from exc
    except grpc.FutureCancelledError as exc:
        raise ElectionError(f"etcd {what} cancelled") from exc


async def next_response(
    responses: Iterator[Any], what: str, *, limiter: trio.CapacityLimiter
) -> Any:
    """The stream's next response, or None once it ended. The blocking read is abandoned
    on cancellation (cancel the stream to wake it)."""
    try:
        return await trio.to_thread.run_sync(
            _next_or_none, responses, abandon_on_cancel=True, limiter=limiter
        )
    except grpc.RpcError as exc:
        raise election_error(what, exc) from exc


def channel_target(endpoints: Sequence[str] | str) -> str:
    """The grpc target for ``endpoints`` (``host:port``, optional ``http://``; a single
    comma-separated string is accepted too). Raises ConfigError."""
    if isinstance(endpoints, str):
        endpoints = endpoints.split(",")
    hosts: list[str] = []
    for raw in endpoints:
        endpoint = raw.strip().rstrip("/")
        if endpoint.startswith("https://"):
            raise ConfigError(f"TLS etcd endpoints are not supported: {raw!r}")
        endpoint = endpoint.removeprefix("http://")
        if endpoint:
            hosts.append(endpoint)
    if not hosts:
        raise ConfigError("no etcd endpoint given")
    if len(hosts) == 1:
        return hosts[0]
    families = {_ip_family(host) for host in hosts}
    if families == {4}:
        return "ipv4:" + ",".join(hosts)
    if families == {6}:
        return "ipv6:" + ",".join(hosts)
    log.warning("several etcd host names given; using the first", extra={"endpoints": hosts})
    return hosts[0]


def grpc_code(exc: BaseException) -> grpc.StatusCode | None:
    """The gRPC status code behind an ElectionError raised by this module, if any."""
    cause = exc.__cause__
    if isinstance(cause, grpc.Call):
        code: grpc.StatusCode = cause.code()
        return code
    return None


def deadline_exceeded(exc: BaseException) -> bool:
    """The call ran out of time: the client's deadline (DEADLINE_EXCEEDED), or etcd's own
    context, which carries that deadline and may expire first (UNKNOWN, "context deadline
    exceeded")."""
    code = grpc_code(exc)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return True
    cause = exc.__cause__
    return (
        code is grpc.StatusCode.UNKNOWN
        and isinstance(cause, grpc.Call)
        and "context deadline exceeded" in (cause.details() or "")
    )


#: What etcd answers when it could not serve a request in time; the request may be sent
#: again (the Campaign of one lease is idempotent).
_BUSY = ("etcdserver: request timed out", "etcdserver: leader changed", "etcdserver: too many")


def server_busy(exc: BaseException) -> bool:
    """etcd answered but could not serve the call in time (its raft proposal timed out, its
    leader changed, it is overloaded): a transient condition, unlike a dead server."""
    cause = exc.__cause__
    return (
        grpc_code(exc) is grpc.StatusCode.UNKNOWN
        and isinstance(cause, grpc.Call)
        and any(text in (cause.details() or "") for text in _BUSY)
    )


def _ip_family(host_port: str) -> int | None:
    host = host_port.rsplit(":", 1)[0].strip("[]")
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def _next_or_none(responses: Iterator[Any]) -> Any:
    try:
        return next(responses)
    except StopIteration:
        return None


def election_error(what: str, exc: grpc.RpcError) -> ElectionError:
    if isinstance(exc, grpc.Call):
        return ElectionError(f"etcd {what} failed: {exc.code().name}: {exc.details()}")
    return ElectionError(f"etcd {what} failed: {exc}")


async def keep_alive(
    open_stream: Callable[[Iterator[rpc_pb2.LeaseKeepAliveRequest]], Any],
    lease_id: int,
    *,
    interval: float,
    limiter: trio.CapacityLimiter,
) -> str:
    """Refresh ``lease_id`` through a ``LeaseKeepAlive`` stream every ``interval`` s.

    ``open_stream(requests)`` starts the stream (the Lease stub's ``LeaseKeepAlive``).
    Returns the reason when the lease is gone (a response with TTL 0); raises ElectionError
    when refreshing is unconfirmed (no answer within ``interval``, stream error). Runs until
    then or until cancelled; the stream is cancelled on the way out.
    """
    requests: queue.SimpleQueue[rpc_pb2.LeaseKeepAliveRequest | None] = queue.SimpleQueue()

    def request_stream() -> Iterator[rpc_pb2.LeaseKeepAliveRequest]:
        while (item := requests.get()) is not None:
            yield item

    responses = await start_call(
        functools.partial(open_stream, request_stream()), "LeaseKeepAlive", limiter=limiter
    )
    try:
        while True:
            sent_at = trio.current_time()
            requests.put(rpc_pb2.LeaseKeepAliveRequest(ID=lease_id))
            response: Any = None
            with trio.move_on_after(interval) as silence:
                response = await next_response(responses, "LeaseKeepAlive", limiter=limiter)
            if silence.cancelled_caught:
                raise ElectionError(
                    f"no keep-alive answer for lease {lease_id:x} within {interval:.2f} s"
                )
            if response is None:
                raise ElectionError("etcd LeaseKeepAlive stream ended")
            if response.TTL <= 0:
                return f"lease {lease_id:x} expired or revoked"
            await trio.sleep_until(sent_at + interval)
    finally:
        requests.put(None)  # ends grpc's request-consuming thread
        responses.cancel()  # wakes a read abandoned above
