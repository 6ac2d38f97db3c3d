"""The bench's app (``JOBSCHEDULER_APP``): ``bench-fan-out``, a workflow step that spawns
``payload.children`` ``noop`` children with ``ctx.spawn_many`` (in chunks of 1,000), so the
``workflows`` phase can time a fan-out's drain. The built-in types stay available."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobscheduler.errors import ValidationError
from jobscheduler.handlers import HandlerRegistry, JobContext

#: Children stored per ``ctx.spawn_many`` call (each call a few round trips).
CHUNK = 1000
MAX_CHILDREN = 100_000


def _validate(payload: Mapping[str, Any]) -> None:
    n = payload.get("children")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_CHILDREN:
        raise ValidationError(f"payload.children: must be an integer between 0 and {MAX_CHILDREN}")


async def fan_out(ctx: JobContext) -> dict[str, int]:
    """Spawn ``payload.children`` noop children (keys ``c0``, ``c1``, ...)."""
    n = int(ctx.payload["children"])
    for start in range(0, n, CHUNK):
        keys = range(start, min(start + CHUNK, n))
        await ctx.spawn_many("noop", {f"c{i}": {} for i in keys})
    return {"children": n}


registry = HandlerRegistry()
registry.register("bench-fan-out", fan_out, validate=_validate)
