"""The outgoing-request guard: with TRAWL_BLOCK_PRIVATE_TARGETS on, Trawl refuses to call back or crawl (for
non-admin requesters) hosts that are, or resolve to, private, loopback, link-local or otherwise non-public addresses,
so an API user cannot make workers reach the metadata service, Redis or the admin on the internal network.

One rule (`address_allowed`) and one resolution (`host_addresses`) serve the three places that decide: submission
(`target_check`), the crawl's guard and connections (runtime/guard/resolver.py) and webhooks
(callbacks/transport.py), each with the operator's allow-list (TRAWL_PRIVATE_TARGETS_ALLOWED).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

from project.net.dns_servers import parse_servers, query_addresses

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# IPv6 forms that carry an IPv4 address a gateway or tunnel delivers to: judged by the address they carry.
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix, v4 in the last 32 bits
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local use: an operator's own translator, never public
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d, still routed by some stacks
# Not globally reachable whatever Python's tables say (they changed between 3.11 patch releases).
NEVER_PUBLIC = tuple(
    ipaddress.ip_network(net) for net in ("fec0::/10", "2001:db8::/32", "100::/64", "ff00::/8", "224.0.0.0/4")
)


def guard_enabled() -> bool:
    return bool(getattr(settings, "TRAWL_BLOCK_PRIVATE_TARGETS", False))


def parse_address(address: str) -> IPAddress:
    return ipaddress.ip_address(address.strip("[]").split("%", 1)[0])  # drop an IPv6 zone id


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to (mapped, compatible, NAT64, 6to4, Teredo); empty if none."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip in NAT64 or ip in IPV4_COMPATIBLE:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # the relay server and the (de-obfuscated) client both receive traffic
    return []


def _plainly_public(ip: IPAddress) -> bool:
    if any(ip in network for network in NEVER_PUBLIC if network.version == ip.version):
        return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified or ip.is_loopback)


def address_is_public(address: str | IPAddress) -> bool:
    ip = address if not isinstance(address, str) else parse_address(address)
    if ip.version == 6:
        if ip in NAT64_LOCAL:
            return False
        embedded = embedded_ipv4(ip)
        if embedded:
            return all(_plainly_public(v4) for v4 in embedded)
    return _plainly_public(ip)


@lru_cache(maxsize=32)
def parse_networks(cidrs: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs if cidr.strip())


def address_allowed(address: str, allowed: Sequence[Network] = ()) -> bool:
    """May a guarded request or a webhook connect to this address? Public, or inside an allow-listed network (an
    IPv4-mapped address is the IPv4 socket it names, so it matches IPv4 networks too)."""
    try:
        ip = parse_address(address)
    except ValueError:
        return False
    if address_is_public(ip):
        return True
    candidates = [ip, ip.ipv4_mapped] if ip.version == 6 and ip.ipv4_mapped else [ip]
    return any(candidate in network for candidate in candidates for network in allowed)


def allowed_networks() -> tuple[Network, ...]:
    """TRAWL_PRIVATE_TARGETS_ALLOWED, parsed."""
    return parse_networks(tuple(getattr(settings, "TRAWL_PRIVATE_TARGETS_ALLOWED", ()) or ()))


def configured_dns_servers() -> list[tuple[str, int]]:
    """TRAWL_DNS_SERVERS, parsed; empty means the system resolver."""
    return parse_servers(getattr(settings, "TRAWL_DNS_SERVERS", ()) or ())


def host_addresses(host: str, *, servers: Iterable[tuple[str, int]] | None = None) -> list[str]:
    """Every address the host resolves to (an IP literal is its own); empty if it does not resolve. `servers`
    (host, port) are asked when given, else TRAWL_DNS_SERVERS, else the system resolver."""
    try:
        return [parse_address(host).compressed]
    except ValueError:
        pass
    servers = list(configured_dns_servers() if servers is None else servers)
    if servers:
        return query_addresses(host, servers=servers)
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    return sorted({info[4][0] for info in infos})


@dataclass(frozen=True)
class Resolution:
    """One resolution of a host and the verdict on it: connect only to `addresses`, and only if `reason` is ""."""

    host: str
    addresses: tuple[str, ...]
    refused: tuple[str, ...]

    @property
    def reason(self) -> str:
        if not self.addresses:
            return f"host {self.host!r} does not resolve"
        if self.refused:
            return f"host {self.host!r} is a private, loopback or link-local address ({self.refused[0]})"
        return ""


def resolve_checked(
    host: str, *, allowed: Sequence[Network], servers: Iterable[tuple[str, int]] | None = None
) -> Resolution:
    """Resolve once and judge every answer: one refused address refuses the host (an attacker controls the order)."""
    addresses = tuple(host_addresses(host, servers=servers))
    refused = tuple(address for address in addresses if not address_allowed(address, allowed))
    return Resolution(host=host, addresses=addresses, refused=refused)


def private_target_reason(url: str) -> str:
    """Why the URL's host must not be called ("" if it may): every resolved address must be public or allow-listed."""
    return resolve_checked(urlsplit(url).hostname or "", allowed=allowed_networks()).reason


def target_check(url: str, *, field: str) -> None:
    """Raise a TrawlError naming `field` if the guard is on and the URL's host is not a public address."""
    if not guard_enabled():
        return
    from project.errors import TrawlError  # DRF: not imported by the crawl side (a packaged child has no Django)

    reason = private_target_reason(url)
    if reason:
        raise TrawlError(f"{reason}; this server only calls public addresses", field=field)
