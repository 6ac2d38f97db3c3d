"""The Unix socket handlers in worker processes reach their executor through: one
length-prefixed JSON frame each way per ``ctx.enqueue``, ``ctx.spawn_sync`` or
``ctx.start_workflow_sync`` (the child's side is
:class:`~jobscheduler.handlers.children.RemoteEnqueuer`). A request names its attempt by the
token the attempt's context carried; the executor's :class:`~.children.Children` answers it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Sequence
from typing import Any, Protocol

import trio

from jobscheduler.errors import ValidationError
from jobscheduler.handlers.children import (
    ChildRequest,
    WorkflowRequest,
    error_reply,
    frame,
    frame_length,
)

log = logging.getLogger(__name__)

#: Bound of reading one request from a worker process.
READ_TIMEOUT = 10.0


class Children(Protocol):
    """What the socket needs of :class:`~.children.Children` (which starts it)."""

    trio_token: trio.lowlevel.TrioToken | None
    path: str | None

    def attempt(self, token: str) -> Any: ...

    async def answer(self, attempt: Any, request: ChildRequest) -> dict[str, Any]: ...

    async def answer_spawn(
        self, attempt: Any, requests: Sequence[ChildRequest]
    ) -> dict[str, Any]: ...

    async def answer_workflow(self, attempt: Any, request: WorkflowRequest) -> dict[str, Any]: ...


async def serve_socket(
    children: Children, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve worker processes' requests on a Unix socket in a temporary directory only this
    user can enter (mkdtemp's mode 0700), removed at the end; reports its path when it
    listens (and sets ``children.path`` while it does)."""
    if children.trio_token is None:
        children.trio_token = trio.lowlevel.current_trio_token()

    async def serve_one(stream: trio.SocketStream) -> None:
        await _serve_one(children, stream)

    with tempfile.TemporaryDirectory(prefix="jobscheduler-enqueue-") as directory:
        path = os.path.join(directory, "enqueue.sock")
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        try:
            await sock.bind(path)
            sock.listen(64)
        except BaseException:
            sock.close()
            raise
        children.path = path
        try:
            task_status.started(path)
            await trio.serve_listeners(serve_one, [trio.SocketListener(sock)])
        finally:
            children.path = None


async def _serve_one(children: Children, stream: trio.SocketStream) -> None:
    async with stream:
        try:
            with trio.fail_after(READ_TIMEOUT):
                message = json.loads(await _receive_frame(stream))
            attempt = children.attempt(str(message.get("token")))
            if attempt is None:
                reply: dict[str, Any] = error_reply(
                    ValidationError("ctx.enqueue: the attempt that made this context has ended")
                )
            elif "spawn" in message:
                requests = [ChildRequest.from_json(r) for r in message["spawn"]]
                reply = await children.answer_spawn(attempt, requests)
            elif "workflow" in message:
                request = WorkflowRequest.from_json(message["workflow"])
                reply = await children.answer_workflow(attempt, request)
            else:
                reply = await children.answer(attempt, ChildRequest.from_json(message["request"]))
        except (ValueError, KeyError, TypeError, trio.TooSlowError) as exc:
            reply = error_reply(ValidationError(f"ctx.enqueue: bad request: {exc}"))
        try:
            await stream.send_all(frame(reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.debug("ctx.enqueue: the worker process went away before its answer")


async def _receive_exactly(stream: trio.SocketStream, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = await stream.receive_some(n - len(data))
        if not chunk:
            raise ValueError("connection closed mid-request")
        data += chunk
    return bytes(data)


async def _receive_frame(stream: trio.SocketStream) -> bytes:
    return await _receive_exactly(stream, frame_length(await _receive_exactly(stream, 4)))
