"""A MongoDB-protocol server as the tests see it: behind the store, and through a proxy.

:func:`raw` runs a function on the jobs collection with a plain client of its own, to look
behind the store. :class:`FaultProxy` sits between a store and the server and drops one
chosen request, or swallows the server's reply to it after the server has executed it, and
then cuts the connection; it can also hold every byte, as a SIGSTOPped server would.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import pymongo
import trio

from jobscheduler.store.mongo.store import COLLECTION

# A command's name is the first element of its OP_MSG body: BSON string type, key, NUL.
FIND_AND_MODIFY = b"\x02findAndModify\x00"
INSERT = b"\x02insert\x00"
UPDATE = b"\x02update\x00"


def server_address(uri: str) -> tuple[str, int]:
    host, port = pymongo.uri_parser.parse_uri(uri)["nodelist"][0]
    return host, port


def via(uri: str, port: int) -> str:
    """``uri`` with its host list replaced by the proxy (and a direct connection to it)."""
    match = re.match(r"^mongodb://(?:([^@/]*)@)?([^/?]*)(/[^?]*)?(?:\?(.*))?$", uri)
    if match is None:
        raise ValueError(f"the fault-injection tests need a mongodb:// URI, got {uri!r}")
    userinfo, _hosts, path, query = match.groups()
    options = [opt for opt in (query or "").split("&") if opt and "replicaSet" not in opt]
    options.append("directConnection=true")
    auth = f"{userinfo}@" if userinfo else ""
    return f"mongodb://{auth}127.0.0.1:{port}{path or '/'}?{'&'.join(options)}"


class FaultProxy:
    """TCP proxy to the server that can lose one request, or one reply, on purpose."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._rule: tuple[bytes, Literal["request", "reply"]] | None = None
        self.fired = trio.Event()
        self._scope = trio.CancelScope()
        self._flowing = trio.Event()
        self._flowing.set()

    def freeze(self) -> None:
        """Hold every byte in both directions (a SIGSTOPped server) until :meth:`thaw`."""
        self._flowing = trio.Event()

    def thaw(self) -> None:
        self._flowing.set()

    def lose_next(self, marker: bytes, what: Literal["request", "reply"]) -> None:
        """Lose the next request containing ``marker`` (never sent), or its reply (sent,
        executed, reply swallowed); either way the client's connection is then cut."""
        self._rule, self.fired = (marker, what), trio.Event()

    def stop(self) -> None:
        """Close the listener and every connection: the server looks down."""
        self._scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        with self._scope:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            task_status.started(listeners[0].socket.getsockname()[1])
            await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, client: trio.SocketStream) -> None:
        swallow = False
        try:
            async with (
                client,
                await trio.open_tcp_stream(*self._upstream) as upstream,
                trio.open_nursery() as nursery,
            ):

                async def requests() -> None:
                    nonlocal swallow
                    while chunk := await client.receive_some(1 << 16):
                        await self._flowing.wait()
                        rule = self._rule
                        if rule is not None and rule[0] in chunk:
                            self._rule = None
                            if rule[1] == "request":
                                self.fired.set()
                                break
                            swallow = True
                        await upstream.send_all(chunk)
                    nursery.cancel_scope.cancel()

                async def replies() -> None:
                    while chunk := await upstream.receive_some(1 << 16):
                        await self._flowing.wait()
                        if swallow:
                            self.fired.set()
                            break
                        await client.send_all(chunk)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(requests)
                nursery.start_soon(replies)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


async def raw(uri: str, database: str, fn: Any) -> Any:
    """Run ``fn(collection)`` with a separate plain client (to look behind the store)."""

    def call() -> Any:
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            uri, serverSelectionTimeoutMS=5000, tz_aware=True
        )
        try:
            return fn(client[database][COLLECTION])
        finally:
            client.close()

    return await trio.to_thread.run_sync(call)
