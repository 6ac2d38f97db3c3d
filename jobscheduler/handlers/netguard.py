"""The address guard of the built-in ``http`` handler: which destinations a job may reach.

A job's URL comes from whoever can call ``POST /jobs``, so without a guard the executor would
fetch cloud metadata (``169.254.169.254``), admin ports on ``localhost`` or any service on the
private network for them (server-side request forgery). The guard:

- turns the URL's host into addresses: an IP literal as is (including the legacy IPv4 forms
  C resolvers accept, such as ``2130706433`` or ``0177.0.0.1``, so they cannot pass as
  names), a name through the (injectable) resolver;
- refuses the whole request if ANY address is internal — loopback, private (RFC 1918),
  link-local (cloud metadata), CGNAT, multicast, unspecified, reserved, broadcast, IPv6 ULA
  and link-local, documentation and benchmarking ranges, and the IPv4-mapped, -compatible,
  6to4 and NAT64 forms of those — unless the allowlist names the host or a network holding
  the address;
- returns the vetted addresses, which :mod:`.guarded_transport` then dials, so the address
  checked is the address connected to (no DNS-rebinding window).

Pure except for the resolver; the tables use the stdlib :mod:`ipaddress` module.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from jobscheduler.domain.addresses import (
    Allowlist,
    IPAddress,
    literal_address,
    normalize_host,
    refusal_reason,
)
from jobscheduler.errors import AddressRefused, ResolveError

#: ``await resolver(host, port)`` -> the host's addresses (empty or ResolveError if none).
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The operating system's resolver (getaddrinfo in a thread), addresses deduplicated."""
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ResolveError(f"cannot resolve {host!r}: {exc.strerror}") from None
    addresses = (ipaddress.ip_address(info[4][0]) for info in infos)
    return list(dict.fromkeys(addresses))


@attrs.frozen(kw_only=True)
class AddressGuard:
    """Decides, per connection, which addresses a request may be sent to."""

    allowlist: Allowlist = attrs.field(factory=Allowlist)
    resolver: Resolver = system_resolver

    async def vet(self, host: str, port: int) -> list[IPAddress]:
        """The addresses to connect to for ``host``, all checked.

        Raises AddressRefused if any address is internal and not allowlisted (nothing has
        been connected to then), ResolveError if the name has no address.
        """
        literal = literal_address(host)
        if literal is not None:
            addresses: list[IPAddress] = [literal]
            named = False
        else:
            addresses = list(await self.resolver(normalize_host(host), port))
            if not addresses:
                raise ResolveError(f"{host!r} resolved to no address")
            named = self.allowlist.allows_host(host)
        if not named:
            for address in addresses:
                reason = refusal_reason(address)
                if reason is not None and not self.allowlist.allows_address(address):
                    shown = host if str(address) == host.strip("[]") else f"{host} -> {address}"
                    raise AddressRefused(f"{shown} is {reason}; not in HTTP_ALLOWLIST")
        return addresses
