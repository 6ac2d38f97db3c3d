"""A connection whose client closed after its answer ends at once, though the server keeps
idle connections for 75 s; one kept open by its client is still kept."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import trio
from hypercorn.trio.tcp_server import TCPServer

from jobscheduler.api.serving import closed_by_client
from jobscheduler.api.serving._patch import patch_once
from jobscheduler.api.serving.server import hypercorn_config, serve_asgi

from .test_one_write import app

REQUEST = b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def _tasks(nursery_owner: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    for nursery in nursery_owner.child_nurseries:
        for task in nursery.child_tasks:
            yield task
            yield from _tasks(task)


def connections() -> int:
    """The server's connections still open (each a task serving it)."""
    root = trio.lowlevel.current_root_task()
    return sum(1 for task in _tasks(root) if task.coro.__qualname__.endswith("_idle_timeout"))


async def ask(stream: trio.SocketStream) -> bytes:
    """Send one request on ``stream``; its whole answer."""
    await stream.send_all(REQUEST)
    data = b""
    while not data.endswith(b"}"):
        data += await stream.receive_some(65536)
    return data


@pytest.fixture
async def port() -> AsyncIterator[int]:
    assert hypercorn_config("127.0.0.1", 0).keep_alive_timeout == 75.0
    async with trio.open_nursery() as nursery:
        [address] = await nursery.start(serve_asgi, app, "127.0.0.1", 0)
        yield int(address.rsplit(":", 1)[1])
        nursery.cancel_scope.cancel()


async def test_connections_closed_by_their_clients_after_an_answer_end_at_once(port: int) -> None:
    for _ in range(5):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await ask(stream)
            # The server has ended the exchange and waits, idle, for the next request.
            with trio.fail_after(5):
                while connections() < 1:  # noqa: ASYNC110
                    await trio.sleep(0.01)
    with trio.fail_after(5):
        while connections():  # noqa: ASYNC110
            await trio.sleep(0.01)


async def test_a_connection_its_client_keeps_open_is_kept_for_the_next_request(port: int) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await ask(stream)
        await trio.sleep(0.2)
        assert connections() == 1
        data = await ask(stream)
        assert data.startswith(b"HTTP/1.1 201 ")


def test_what_is_wrapped_is_still_there() -> None:
    closed_by_client.install()
    assert getattr(TCPServer, "_jobscheduler_closed_by_client", False)
    assert callable(getattr(TCPServer, "_read_data", None))


def test_a_method_an_upgrade_moved_is_refused_by_name() -> None:
    class Moved:
        pass

    with pytest.raises(RuntimeError, match="hypercorn's Moved has no _read_data to wrap"):
        patch_once(Moved, "_read_data", lambda original: original, marker="_m")
    assert not hasattr(Moved, "_m")
