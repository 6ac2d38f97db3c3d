"""The pieces of the bench's create phase that run in process: the echo route it is
judged against, and the CPU reading of a server process."""

from __future__ import annotations

import json
import os
import time

from jobscheduler.tools.bench.create import cpu_seconds
from jobscheduler.tools.bench.echo_app import create_echo_app


async def test_echo_route_answers_201_with_the_json_body_it_was_sent() -> None:
    app = create_echo_app()
    body = {"idempotencyKey": "k-1", "payload": {"n": 1, "text": "é"}}
    async with app.test_app() as test_app:
        response = await test_app.test_client().post("/echo", json=body)
        assert response.status_code == 201
        assert response.content_type == "application/json"
        assert json.loads(await response.get_data(as_text=True)) == body


def test_cpu_seconds_of_a_process_grows_while_it_computes() -> None:
    before = cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert cpu_seconds(os.getpid()) - before >= 0.03  # clock ticks are 10 ms
