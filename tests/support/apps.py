"""Handler apps that a test writes to a directory of its own and loads with ``--app`` (or
JOBSCHEDULER_APP): ``def`` handlers that sleep in their worker process (after writing its pid
to the payload's ``pidFile``), and a gate that fails while a file exists."""

from __future__ import annotations

import textwrap
from pathlib import Path

_HEADER = """
    import os
    import time
    from pathlib import Path

    import trio

    from jobscheduler import PermanentError
    from jobscheduler.handlers import HandlerRegistry

    registry = HandlerRegistry()
"""

_NAPS = """

    def _started(ctx):
        Path(ctx.payload["pidFile"]).write_text(str(os.getpid()))


    @registry.handler("nap")
    def nap(ctx):
        _started(ctx)
        time.sleep(600)


    @registry.handler("nap-timeout", timeout="1s")
    def nap_timeout(ctx):
        _started(ctx)
        time.sleep(600)


    @registry.handler("nap-thread-timeout", timeout="1s", run_in="thread")
    def nap_thread_timeout(ctx):
        time.sleep(600)


    @registry.handler("nap-async-timeout", timeout="1s")
    async def nap_async_timeout(ctx):
        await trio.sleep(600)
"""

_GATE = """

    @registry.handler("gate")
    async def gate(ctx):
        if Path(ctx.payload["closed"]).exists():
            raise PermanentError("the gate is closed")
        return None
"""

#: ``nap`` sleeps 10 minutes; ``nap-timeout`` too, with a 1 s timeout; ``nap-thread-timeout``
#: and ``nap-async-timeout`` sleep in a thread and on trio, with a 1 s timeout.
SLEEPY_APP = _HEADER + _NAPS
#: ``gate`` completes, or fails for good while the payload's ``closed`` file exists.
GATE_APP = _HEADER + _GATE
#: Both.
SLEEPY_AND_GATE_APP = _HEADER + _NAPS + _GATE


def write_app(directory: Path, module: str, source: str) -> dict[str, str]:
    """Write ``source`` as ``<directory>/<module>.py``; returns the environment that lets a
    process import it (``PYTHONPATH``)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{module}.py").write_text(textwrap.dedent(source))
    return {"PYTHONPATH": str(directory)}
