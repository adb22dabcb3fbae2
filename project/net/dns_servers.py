"""Asking the DNS servers an operator named (TRAWL_DNS_SERVERS) for a host's addresses, without the system resolver:
for networks whose crawlers must use a filtering or split-horizon resolver, and for tests that need answers they
control. A name that does not resolve, or servers that do not answer, give no addresses (the caller refuses)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import dns.exception
import dns.inet

logger = logging.getLogger("trawl.dns")

DNS_PORT = 53
QUERY_TIMEOUT = 2.0  # seconds per server and attempt
LIFETIME = 5.0  # seconds for one record type over every server


def parse_servers(entries: Iterable[str]) -> list[tuple[str, int]]:
    """ "host", "host:port", "[v6]:port" or a bare IPv6 address → (address, port). Raises ValueError on a bad entry."""
    servers = []
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        if entry.startswith("["):
            host, _, port = entry[1:].partition("]")
            port = port.lstrip(":")
        elif entry.count(":") == 1:
            host, port = entry.split(":")
        else:
            host, port = entry, ""
        if not dns.inet.is_address(host):
            raise ValueError(f"DNS server {entry!r} is not an IP address (with an optional :port)")
        servers.append((host, int(port) if port else DNS_PORT))
    return servers


def query_addresses(host: str, *, servers: list[tuple[str, int]]) -> list[str]:
    """The A and AAAA addresses of `host` (CNAMEs followed) as the servers answer them now; no cache."""
    # Here, not at the top: settings parse TRAWL_DNS_SERVERS in every process, but only installations that set it
    # query them, and dnspython's resolver (150 modules, ~9 MiB) would otherwise sit in every crawl process.
    import dns.nameserver
    import dns.resolver

    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [dns.nameserver.Do53Nameserver(address, port) for address, port in servers]
    resolver.timeout, resolver.lifetime = QUERY_TIMEOUT, LIFETIME
    addresses: set[str] = set()
    for rdtype in ("A", "AAAA"):
        try:
            answer = resolver.resolve(host, rdtype, search=False, raise_on_no_answer=False)
        except (dns.exception.DNSException, ValueError) as exc:
            logger.debug("DNS %s %s: %s", rdtype, host, exc)
            continue
        if answer.rrset is not None:
            addresses.update(record.address for record in answer.rrset)
    return sorted(addresses)
