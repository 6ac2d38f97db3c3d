"""``ctx.enqueue``: a handler enqueues jobs (and starts workflows: ``ctx.start_workflow``)
through its executor, never over HTTP.

The executor stores a handler's new jobs itself, with its own store connection, in the
handler's tenant, through the same validation and insert as ``POST /jobs``
(:mod:`jobscheduler.roles.executor.children`). A handler reaches it through the
:class:`Enqueuer` on its context:

- an ``async def`` handler (on the executor's trio loop) awaits ``ctx.enqueue_async``;
- a ``def`` handler in a worker thread calls ``ctx.enqueue``, which runs the same coroutine
  on the executor's loop and waits for it;
- a ``def`` handler in a worker process holds the context as it was pickled: its enqueuer
  became a :class:`RemoteEnqueuer`, the path of the executor's Unix socket and a random
  token naming the attempt. ``ctx.enqueue`` sends the request there (one length-prefixed
  JSON frame each way) and waits for the answer. A token is valid only while its attempt
  runs, so a worker left over from a stopped attempt cannot enqueue in its name.

This module is both ends' shared vocabulary: the request, its wire format, and the child's
side of the socket.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from jobscheduler.errors import JobSchedulerError, StoreError, ValidationError

#: Longest ``name`` a handler may give a job it enqueues (it becomes part of the key).
MAX_NAME_LENGTH = 128
#: How long a worker process waits for its executor to answer one ``ctx.enqueue``.
REMOTE_TIMEOUT = 30.0
#: Largest frame either side accepts (a request's payload is at most the API's 1 MiB).
MAX_FRAME = 2 * 1024 * 1024
_LENGTH = struct.Struct(">I")


@attrs.frozen(kw_only=True)
class ChildRequest:
    """One job a handler asks its executor to store."""

    job_type: str
    payload: dict[str, Any] = attrs.field(factory=dict)
    #: RFC3339; None: due now (or after ``delay`` seconds).
    scheduled_at: str | None = None
    delay: float | None = None
    #: Names the job within its parent (its key derives from it); None: the call's order.
    name: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    #: A child of the workflow step (``ctx.spawn``, ``name`` its key), not a plain job.
    spawn: bool = False

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChildRequest:
        fields = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ValidationError(f"unknown field(s): {', '.join(unknown)}")
        return cls(**data)


@attrs.frozen(kw_only=True)
class WorkflowRequest:
    """A workflow a handler asks its executor to start (``ctx.start_workflow``)."""

    #: The steps, as in ``POST /workflows``.
    steps: list[dict[str, Any]]
    #: Names the workflow within its parent job (its key derives from it); None: the
    #: call's order among the attempt's requests.
    name: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkflowRequest:
        unknown = sorted(set(data) - {"steps", "name"})
        if unknown:
            raise ValidationError(f"unknown field(s): {', '.join(unknown)}")
        return cls(**data)


class Enqueuer(Protocol):
    """How a running handler's context reaches its executor (see the module doc)."""

    def enqueue(self, request: ChildRequest) -> dict[str, Any]:
        """Store the job and return it as the API shows it (blocking: ``def`` handlers)."""

    async def enqueue_async(self, request: ChildRequest) -> dict[str, Any]:
        """The same, awaited on the executor's trio loop (``async def`` handlers)."""

    def spawn(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        """Store the children of the running step (``ctx.spawn``), blocking; as the API
        shows them, in order."""

    async def spawn_async(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        """The same, awaited on the executor's trio loop."""

    def start_workflow(self, request: WorkflowRequest) -> dict[str, Any]:
        """Store the workflow and return it as the API shows it (blocking)."""

    async def start_workflow_async(self, request: WorkflowRequest) -> dict[str, Any]:
        """The same, awaited on the executor's trio loop."""


# -- the wire -------------------------------------------------------------------------------


def frame(value: Any) -> bytes:
    data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return _LENGTH.pack(len(data)) + data


def frame_length(header: bytes) -> int:
    """The length a frame's 4-byte header announces; ValueError past MAX_FRAME."""
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME:
        raise ValueError(f"frame of {length} bytes is over {MAX_FRAME}")
    return int(length)


#: Errors that cross back to the child under their own type.
_ERRORS: dict[str, type[JobSchedulerError]] = {
    "ValidationError": ValidationError,
    "StoreError": StoreError,
}


def error_reply(exc: JobSchedulerError) -> dict[str, Any]:
    name = next((n for n, t in _ERRORS.items() if isinstance(exc, t)), "JobSchedulerError")
    return {"error": str(exc), "type": name}


def answer_of(reply: Mapping[str, Any], field: str = "job") -> dict[str, Any]:
    """The job (or what ``field`` names) of an answer, or the error it carries, raised as
    its type."""
    if "error" in reply:
        raise _ERRORS.get(str(reply.get("type")), JobSchedulerError)(str(reply["error"]))
    answer: dict[str, Any] = dict(reply[field])
    return answer


def answers_of(reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The jobs of a spawn's answer, or the error it carries, raised as its type."""
    if "error" in reply:
        raise _ERRORS.get(str(reply.get("type")), JobSchedulerError)(str(reply["error"]))
    return [dict(job) for job in reply["jobs"]]


def _receive_exactly(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the executor closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


@attrs.frozen
class RemoteEnqueuer:
    """The enqueuer of a context pickled into a worker process: the executor's socket."""

    path: str
    token: str

    def _ask(self, message: dict[str, Any]) -> Any:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(REMOTE_TIMEOUT)
                sock.connect(self.path)
                sock.sendall(frame({"token": self.token, **message}))
                length = frame_length(_receive_exactly(sock, _LENGTH.size))
                return json.loads(_receive_exactly(sock, length))
        except (OSError, ValueError) as exc:
            raise StoreError(f"ctx.enqueue: the executor did not answer: {exc}") from exc

    def enqueue(self, request: ChildRequest) -> dict[str, Any]:
        return answer_of(self._ask({"request": request.to_json()}))

    async def enqueue_async(self, request: ChildRequest) -> dict[str, Any]:
        raise RuntimeError("ctx.enqueue_async is for async def handlers; call ctx.enqueue")

    def spawn(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        return answers_of(self._ask({"spawn": [r.to_json() for r in requests]}))

    async def spawn_async(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        raise RuntimeError("ctx.spawn is for async def handlers; call ctx.spawn_sync")

    def start_workflow(self, request: WorkflowRequest) -> dict[str, Any]:
        return answer_of(self._ask({"workflow": request.to_json()}), "workflow")

    async def start_workflow_async(self, request: WorkflowRequest) -> dict[str, Any]:
        raise RuntimeError(
            "ctx.start_workflow is for async def handlers; call ctx.start_workflow_sync"
        )


@attrs.frozen
class NoEnqueuer:
    """The enqueuer of a context run outside an executor (tests, ``Handler.run``)."""

    reason: str = "this context was not made by an executor"

    def enqueue(self, request: ChildRequest) -> dict[str, Any]:
        raise RuntimeError(f"ctx.enqueue is unavailable: {self.reason}")

    async def enqueue_async(self, request: ChildRequest) -> dict[str, Any]:
        raise RuntimeError(f"ctx.enqueue_async is unavailable: {self.reason}")

    def spawn(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        raise RuntimeError(f"ctx.spawn is unavailable: {self.reason}")

    async def spawn_async(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        raise RuntimeError(f"ctx.spawn is unavailable: {self.reason}")

    def start_workflow(self, request: WorkflowRequest) -> dict[str, Any]:
        raise RuntimeError(f"ctx.start_workflow is unavailable: {self.reason}")

    async def start_workflow_async(self, request: WorkflowRequest) -> dict[str, Any]:
        raise RuntimeError(f"ctx.start_workflow is unavailable: {self.reason}")


__all__ = ["ChildRequest", "Enqueuer", "NoEnqueuer", "RemoteEnqueuer", "WorkflowRequest"]
