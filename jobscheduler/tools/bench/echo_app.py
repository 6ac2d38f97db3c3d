"""The floor the create path is judged against: a trivial quart-trio app on hypercorn whose
one route parses a JSON body and echoes it (``POST /echo`` -> 201 with the same JSON).

Served exactly like the API of ``jobscheduler dev``
(:func:`jobscheduler.observability.metrics.serve_asgi`,
the same hypercorn settings, one trio process), so ``jobscheduler bench --phases create`` can
compare ``POST /jobs`` with what the framework itself costs per request, in the same run.

    python -m jobscheduler.tools.bench.echo_app --port 8099
"""

from __future__ import annotations

import argparse
import json
import signal

import trio
from quart import Response, request
from quart_trio import QuartTrio

from jobscheduler.api.serving.server import serve_asgi


def create_echo_app() -> QuartTrio:
    app = QuartTrio(__name__, static_folder=None)

    @app.post("/echo")
    async def echo() -> Response:
        body = await request.get_json()
        return Response(json.dumps(body), status=201, content_type="application/json")

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response("ok", status=200, content_type="text/plain; charset=utf-8")

    return app


async def _serve(host: str, port: int) -> None:
    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            nursery.start_soon(serve_asgi, create_echo_app(), host, port)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    trio.run(_serve, args.host, args.port)


if __name__ == "__main__":
    main()
