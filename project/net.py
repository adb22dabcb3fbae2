"""The outgoing-request guard: with TRAWL_BLOCK_PRIVATE_TARGETS on, Trawl refuses to call back or crawl (for
non-admin requesters) hosts that are, or resolve to, private, loopback, link-local or otherwise non-public addresses,
so an API user cannot make workers reach the metadata service, Redis or the admin on the internal network."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from project.errors import TrawlError


def guard_enabled() -> bool:
    return bool(getattr(settings, "TRAWL_BLOCK_PRIVATE_TARGETS", False))


def address_is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def host_addresses(host: str) -> list[str]:
    """Every address the host resolves to (an IP literal is its own); empty if it does not resolve."""
    try:
        return [ipaddress.ip_address(host.strip("[]")).compressed]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    return sorted({info[4][0] for info in infos})


def private_target_reason(url: str) -> str:
    """Why the URL's host must not be called ("" if it may). Every resolved address must be public."""
    host = urlsplit(url).hostname or ""
    addresses = host_addresses(host)
    if not addresses:
        return f"host {host!r} does not resolve"
    private = [address for address in addresses if not address_is_public(address)]
    if private:
        return f"host {host!r} is a private, loopback or link-local address ({private[0]})"
    return ""


def target_check(url: str, *, field: str) -> None:
    """Raise a TrawlError naming `field` if the guard is on and the URL's host is not a public address."""
    if not guard_enabled():
        return
    reason = private_target_reason(url)
    if reason:
        raise TrawlError(f"{reason}; this server only calls public addresses", field=field)
