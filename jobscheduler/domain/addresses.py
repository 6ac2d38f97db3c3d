"""Which network addresses a job may reach: the rules of the ``http`` handler's address guard.

Pure (the stdlib :mod:`ipaddress` tables only): the resolver and the guard that applies these
rules to a job's URL are :mod:`jobscheduler.handlers.netguard`. Settings use
:meth:`Allowlist.parse` to refuse a bad ``HTTP_ALLOWLIST`` entry at start-up.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable

import attrs

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _v4(text: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(text)


def _v6(text: str) -> ipaddress.IPv6Network:
    return ipaddress.IPv6Network(text)


# Network -> why it is refused. Checked in order, before the stdlib's "not globally
# reachable" catch-all (so the reason is specific where it can be).
_REFUSED_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_v4("0.0.0.0/8"), "unspecified ('this network')"),
    (_v4("10.0.0.0/8"), "private (RFC 1918)"),
    (_v4("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"),
    (_v4("127.0.0.0/8"), "loopback"),
    (_v4("169.254.0.0/16"), "link-local (cloud metadata)"),
    (_v4("172.16.0.0/12"), "private (RFC 1918)"),
    (_v4("192.0.0.0/24"), "IETF protocol assignments"),
    (_v4("192.0.2.0/24"), "documentation"),
    (_v4("192.88.99.0/24"), "6to4 relay anycast"),
    (_v4("192.168.0.0/16"), "private (RFC 1918)"),
    (_v4("198.18.0.0/15"), "benchmarking"),
    (_v4("198.51.100.0/24"), "documentation"),
    (_v4("203.0.113.0/24"), "documentation"),
    (_v4("224.0.0.0/4"), "multicast"),
    (_v4("255.255.255.255/32"), "broadcast"),
    (_v4("240.0.0.0/4"), "reserved"),
)
_UNSPECIFIED_V6 = ipaddress.IPv6Address("::")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")
_REFUSED_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_v6("100::/64"), "discard-only"),
    (_v6("2001::/23"), "IETF protocol assignments (Teredo and others)"),
    (_v6("2001:db8::/32"), "documentation"),
    (_v6("3fff::/20"), "documentation"),
    (_v6("5f00::/16"), "segment routing"),
    (_v6("fc00::/7"), "unique local (ULA)"),
    (_v6("fe80::/10"), "link-local"),
    (_v6("fec0::/10"), "site-local"),
    (_v6("ff00::/8"), "multicast"),
)
# IPv6 forms that carry an IPv4 address in their low 32 bits (the translators).
_NAT64 = (_v6("64:ff9b::/96"), _v6("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = _v6("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address stands for (and the form's name), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in net for net in _NAT64):
        return low, "NAT64"
    if address in _IPV4_COMPATIBLE and address not in (_UNSPECIFIED_V6, _LOOPBACK_V6):
        return low, "IPv4-compatible"
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why ``address`` is not a public destination, or None when it is one."""
    if isinstance(address, ipaddress.IPv6Address):
        if address == _UNSPECIFIED_V6:
            return "unspecified"
        if address == _LOOPBACK_V6:
            return "loopback"
        embedded = embedded_ipv4(address)
        if embedded is not None:
            inner, form = embedded
            reason = refusal_reason(inner)
            return None if reason is None else f"{form} form of {inner}: {reason}"
        for net6, why in _REFUSED_V6:
            if address in net6:
                return why
    else:
        for net4, why in _REFUSED_V4:
            if address in net4:
                return why
    if not address.is_global:
        return "not globally reachable"
    return None


# What C's inet_aton accepts besides dotted quads: 1 to 4 parts, each decimal, octal (0...)
# or hex (0x...). A URL host made only of these is an address, never a name.
_LEGACY_IPV4 = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)(?:\.(?:0[xX][0-9a-fA-F]*|[0-9]+)){0,3}")


def literal_address(host: str) -> IPAddress | None:
    """The address a URL host names literally (``[::1]``, ``127.0.0.1``, ``2130706433``,
    ``0177.0.0.1``, ``0x7f.1``), or None when the host is a name to resolve."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    text = text.removesuffix(".")  # "127.0.0.1." is still that address
    try:
        return ipaddress.ip_address(text.replace("%25", "%", 1))
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            pass
    return None


def normalize_host(host: str) -> str:
    """Lower case, no trailing dot: the form names are compared in."""
    return host.lower().rstrip(".")


_HOSTNAME = re.compile(
    r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
)


@attrs.frozen
class Allowlist:
    """Host names and networks the guard lets through although they are internal."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Allowlist:
        """Build from entries like ``127.0.0.1``, ``10.1.0.0/16``, ``::1``, ``hooks.internal``.

        Raises ValueError naming the entry for a malformed one, a network with host bits set
        or a legacy IPv4 form (write the dotted quad).
        """
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip()
            if entry.startswith("[") and "]" in entry:
                entry = entry[1:].replace("]", "", 1)
            try:
                networks.append(ipaddress.ip_network(entry, strict=True))
                continue
            except ValueError as exc:
                detail = f" ({exc})" if "/" in entry or ":" in entry else ""
            name = normalize_host(entry)
            if _LEGACY_IPV4.fullmatch(name):
                raise ValueError(f"{raw.strip()!r}: write IPv4 addresses as dotted quads")
            if detail or not _HOSTNAME.fullmatch(name):
                raise ValueError(
                    f"{raw.strip()!r} is not an IP address, a network or a host name{detail}"
                )
            hosts.add(name)
        return cls(frozenset(hosts), tuple(networks))

    def allows_host(self, host: str) -> bool:
        return normalize_host(host) in self.hosts

    def allows_address(self, address: IPAddress) -> bool:
        """True if a listed network holds the address (or the IPv4 address it stands for)."""
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address):
            embedded = embedded_ipv4(address)
            if embedded is not None:
                candidates.append(embedded[0])
            if address.scope_id:
                candidates.append(ipaddress.IPv6Address(str(address).split("%", 1)[0]))
        return any(
            candidate.version == net.version and candidate in net
            for candidate in candidates
            for net in self.networks
        )
