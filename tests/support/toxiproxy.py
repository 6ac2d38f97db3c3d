"""A bad network between the roles and their servers: Toxiproxy (v2, built by
``scripts/deps.sh``) as a TCP proxy in front of each server, and its HTTP API to add and
remove "toxics" on a link.

The three faults the fault suite injects, each on both directions of a link:

- :func:`latency`: every chunk of data is delayed (a slow, jittery network);
- :func:`resets`: each connection is reset by its peer soon after it opens, so every call
  in flight meets a mid-stream RST and every new connection lives only briefly;
- :func:`half_open`: the proxy still accepts connections and bytes but never forwards
  them, and never closes: a connection that accepts writes and never answers (a dead
  peer behind a stateful firewall, a frozen VM).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import attrs
import httpx

#: The directions of a link a toxic is applied to (client -> server, server -> client).
STREAMS = ("upstream", "downstream")


@attrs.frozen(kw_only=True)
class Toxic:
    """One kind of fault, as the Toxiproxy API names it."""

    type: str
    attributes: Mapping[str, int] = attrs.field(factory=dict)
    #: The fraction of connections it applies to.
    toxicity: float = 1.0


def latency(ms: int = 50, jitter_ms: int = 25) -> Toxic:
    return Toxic(type="latency", attributes={"latency": ms, "jitter": jitter_ms})


def resets(after_ms: int = 300) -> Toxic:
    return Toxic(type="reset_peer", attributes={"timeout": after_ms})


def half_open() -> Toxic:
    # timeout 0: data is dropped and the connection never closed until the toxic goes.
    return Toxic(type="timeout", attributes={"timeout": 0})


@attrs.frozen(kw_only=True)
class Link:
    """One proxied link: clients connect to ``listen``, the proxy forwards to ``upstream``."""

    name: str
    listen: str
    upstream: str

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


@attrs.define
class Toxiproxy:
    """The HTTP API of one Toxiproxy server."""

    api: str

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        async with httpx.AsyncClient(base_url=self.api, timeout=10.0) as client:
            response = await client.request(method, path, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"toxiproxy {method} {path}: {response.status_code} {response.text}")
        return response.json() if response.content else None

    async def version(self) -> str:
        async with httpx.AsyncClient(base_url=self.api, timeout=2.0) as client:
            return (await client.get("/version")).text

    async def link(self, name: str, listen: str, upstream: str) -> Link:
        """A proxy from ``listen`` to ``upstream`` (replacing one of the same name)."""
        with contextlib.suppress(RuntimeError):
            await self._call("DELETE", f"/proxies/{name}")
        await self._call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream})
        return Link(name=name, listen=listen, upstream=upstream)

    async def add(self, link: Link, toxic: Toxic, *, label: str) -> None:
        """Apply ``toxic`` to both directions of ``link``."""
        for stream in STREAMS:
            await self._call(
                "POST",
                f"/proxies/{link.name}/toxics",
                {
                    "name": f"{label}-{stream}",
                    "type": toxic.type,
                    "stream": stream,
                    "toxicity": toxic.toxicity,
                    "attributes": dict(toxic.attributes),
                },
            )

    async def remove(self, link: Link, *, label: str) -> None:
        for stream in STREAMS:
            with contextlib.suppress(RuntimeError):
                await self._call("DELETE", f"/proxies/{link.name}/toxics/{label}-{stream}")

    @contextlib.asynccontextmanager
    async def poisoned(self, links: Sequence[Link], toxic: Toxic) -> AsyncIterator[None]:
        """``toxic`` on every link for the duration of the block (removed however it ends)."""
        label = toxic.type
        try:
            for link in links:
                await self.add(link, toxic, label=label)
            yield
        finally:
            for link in links:
                await self.remove(link, label=label)
