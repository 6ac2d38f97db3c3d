"""``run_roles`` in process: what it does once every role is up."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import trio

from jobscheduler.process.assembly import embedded_deps, run_roles

from .conftest import make_settings


async def test_the_heap_of_a_started_process_is_frozen_once_its_roles_are_ready(
    tmp_path: Path,
) -> None:
    """Full collections then skip what the start-up allocated (see ``settle_heap``)."""
    settings = make_settings(tmp_path, metrics_host="127.0.0.1", metrics_port=0)
    deps = embedded_deps(settings)
    ready = trio.Event()
    frozen_when_ready: list[int] = []

    class OnReady(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "ready":
                frozen_when_ready.append(gc.get_freeze_count())
                ready.set()

    handler = OnReady()
    logger = logging.getLogger("jobscheduler.process.assembly")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_roles, deps, ["reaper"])
            with trio.fail_after(20):
                await ready.wait()
            nursery.cancel_scope.cancel()
        assert frozen_when_ready[0] > 0
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        gc.unfreeze()
