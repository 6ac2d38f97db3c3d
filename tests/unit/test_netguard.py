"""The address guard of the ``http`` handler, without any network: which addresses are
refused, how URL hosts are read, what the allowlist lets through, and that the resolver is
the only source of addresses for a name."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pytest

from jobscheduler.domain.addresses import Allowlist, IPAddress, literal_address, refusal_reason
from jobscheduler.errors import AddressRefused, ResolveError
from jobscheduler.handlers.netguard import AddressGuard, system_resolver


def ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text)


REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("10.0.0.1", "private (RFC 1918)"),
    ("172.16.5.4", "private (RFC 1918)"),
    ("172.31.255.255", "private (RFC 1918)"),
    ("192.168.1.1", "private (RFC 1918)"),
    ("169.254.169.254", "link-local (cloud metadata)"),
    ("100.64.0.1", "carrier-grade NAT (RFC 6598)"),
    ("100.127.255.254", "carrier-grade NAT (RFC 6598)"),
    ("0.0.0.0", "unspecified ('this network')"),
    ("224.0.0.251", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("192.0.0.8", "IETF protocol assignments"),
    ("192.0.2.10", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fc00::1", "unique local (ULA)"),
    ("fd12:3456::1", "unique local (ULA)"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1: loopback"),
    ("::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254: link-local (cloud metadata)"),
    ("::ffff:10.0.0.1", "IPv4-mapped form of 10.0.0.1: private (RFC 1918)"),
    ("::127.0.0.1", "IPv4-compatible form of 127.0.0.1: loopback"),
    ("2002:7f00:1::", "6to4 form of 127.0.0.1: loopback"),
    ("2002:a9fe:a9fe::1", "6to4 form of 169.254.169.254: link-local (cloud metadata)"),
    ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1: loopback"),
    ("64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254: link-local (cloud metadata)"),
    ("64:ff9b:1::a00:1", "NAT64 form of 10.0.0.1: private (RFC 1918)"),
    ("2001::1", "IETF protocol assignments (Teredo and others)"),
]


@pytest.mark.parametrize(("address", "reason"), REFUSED)
def test_internal_addresses_are_refused_with_their_reason(address: str, reason: str) -> None:
    assert refusal_reason(ip(address)) == reason


@pytest.mark.parametrize(
    "address",
    [
        "93.184.215.14",
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_public_addresses_and_their_translated_forms_pass(address: str) -> None:
    assert refusal_reason(ip(address)) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("017700000001", "127.0.0.1"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
        ("fe80::1%25eth0", "fe80::1%eth0"),
    ],
)
def test_url_hosts_in_any_numeric_form_are_addresses_not_names(host: str, address: str) -> None:
    assert literal_address(host) == ip(address)


@pytest.mark.parametrize("host", ["localhost", "example.com", "0x7f.example", "1.2.3.4.5", "cafe"])
def test_names_are_not_taken_for_addresses(host: str) -> None:
    assert literal_address(host) is None


# ----------------------------------------------------------------------- allowlist


def test_allowlist_reads_addresses_networks_and_host_names() -> None:
    allow = Allowlist.parse([" 127.0.0.1", "10.1.0.0/16", "[::1]", "fd00::/8", "Hooks.Internal."])
    assert allow.hosts == frozenset({"hooks.internal"})
    assert allow.allows_address(ip("127.0.0.1"))
    assert allow.allows_address(ip("10.1.200.3"))
    assert not allow.allows_address(ip("10.2.0.1"))
    assert allow.allows_address(ip("::1"))
    assert allow.allows_address(ip("fd00::5"))
    assert allow.allows_host("HOOKS.internal.")
    assert not allow.allows_host("other.internal")


def test_allowlisted_ipv4_also_allows_its_mapped_form_only() -> None:
    allow = Allowlist.parse(["127.0.0.1"])
    assert allow.allows_address(ip("::ffff:127.0.0.1"))
    assert not allow.allows_address(ip("127.0.0.2"))
    assert not allow.allows_address(ip("::1"))


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("10.0.0.1/8", "host bits set"),
        ("10.0.0.0/33", "not an IP address, a network or a host name"),
        ("2130706433", "dotted quads"),
        ("0177.0.0.1", "dotted quads"),
        ("exa mple.com", "not an IP address, a network or a host name"),
        ("http://example.com", "not an IP address, a network or a host name"),
        ("*.example.com", "not an IP address, a network or a host name"),
    ],
)
def test_allowlist_rejects_malformed_entries_naming_them(entry: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as info:
        Allowlist.parse([entry])
    assert repr(entry) in str(info.value)


# ----------------------------------------------------------------------- the guard


class FakeResolver:
    """A resolver from a table; records every lookup."""

    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.calls.append((host, port))
        if host not in self.table:
            raise ResolveError(f"cannot resolve {host!r}")
        return [ip(a) for a in self.table[host]]


async def test_a_literal_address_is_checked_without_any_lookup() -> None:
    resolver = FakeResolver({})
    guard = AddressGuard(resolver=resolver)
    with pytest.raises(AddressRefused, match="link-local"):
        await guard.vet("169.254.169.254", 80)
    assert await guard.vet("93.184.215.14", 443) == [ip("93.184.215.14")]
    assert resolver.calls == []


async def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    resolver = FakeResolver({"internal.example": ["10.0.0.1"]})
    guard = AddressGuard(resolver=resolver)
    with pytest.raises(AddressRefused) as info:
        await guard.vet("internal.example", 443)
    assert str(info.value) == (
        "internal.example -> 10.0.0.1 is private (RFC 1918); not in HTTP_ALLOWLIST"
    )
    assert resolver.calls == [("internal.example", 443)]


async def test_one_internal_address_among_public_ones_refuses_the_name() -> None:
    guard = AddressGuard(resolver=FakeResolver({"mixed.example": ["93.184.215.14", "127.0.0.1"]}))
    with pytest.raises(AddressRefused, match="loopback"):
        await guard.vet("mixed.example", 80)


async def test_public_names_pass_with_every_address_in_resolver_order() -> None:
    resolver = FakeResolver({"example.com": ["93.184.215.14", "2606:2800:21f:cb07::1"]})
    guard = AddressGuard(resolver=resolver)
    assert await guard.vet("Example.COM.", 80) == [
        ip("93.184.215.14"),
        ip("2606:2800:21f:cb07::1"),
    ]
    assert resolver.calls == [("example.com", 80)]


async def test_an_allowlisted_name_may_resolve_to_internal_addresses() -> None:
    guard = AddressGuard(
        allowlist=Allowlist.parse(["hooks.internal"]),
        resolver=FakeResolver({"hooks.internal": ["10.0.0.7"], "other.internal": ["10.0.0.7"]}),
    )
    assert await guard.vet("hooks.internal", 80) == [ip("10.0.0.7")]
    with pytest.raises(AddressRefused):
        await guard.vet("other.internal", 80)


async def test_an_allowlisted_network_admits_names_resolving_into_it() -> None:
    guard = AddressGuard(
        allowlist=Allowlist.parse(["10.0.0.0/24"]),
        resolver=FakeResolver({"a.internal": ["10.0.0.7"], "b.internal": ["10.0.1.7"]}),
    )
    assert await guard.vet("a.internal", 80) == [ip("10.0.0.7")]
    with pytest.raises(AddressRefused, match=r"10\.0\.1\.7"):
        await guard.vet("b.internal", 80)


async def test_a_name_without_addresses_is_a_resolve_error_not_a_refusal() -> None:
    guard = AddressGuard(resolver=FakeResolver({"empty.example": []}))
    with pytest.raises(ResolveError):
        await guard.vet("empty.example", 80)
    with pytest.raises(ResolveError):
        await guard.vet("missing.example", 80)


async def test_the_system_resolver_answers_addresses_for_localhost() -> None:
    addresses = await system_resolver("localhost", 80)
    assert addresses
    assert all(address.is_loopback for address in addresses)
    assert len(addresses) == len(set(addresses))
