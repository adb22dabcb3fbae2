"""The private-target guard at fetch time: every request a non-admin job makes — its start URL, followed links and
redirects (Scrapy schedules a redirect as a new request, so it comes through here too) — is checked by the addresses
its host resolves to now, not by what the start URL looked like at submission. Private, loopback, link-local and
other non-public addresses are refused (error class `blocked_target` when nothing else was fetched).

On when TRAWL_BLOCK_PRIVATE_TARGETS is (production settings) and the job's requester is not an admin; the runner
sets TRAWL_GUARD_PRIVATE_TARGETS per crawl. TRAWL_PRIVATE_TARGETS_ALLOWED lists networks an operator trusts anyway.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from project.net import address_is_public

RESOLVE_CACHE_SECONDS = 30.0


class PrivateTargetRefused(IgnoreRequest):
    """The request's host is, or resolves to, an address this job may not reach."""


def address_allowed(address: str, allowed: list[Any]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return address_is_public(address) or any(ip in network for network in allowed)


class PrivateTargetGuard:
    def __init__(self, *, allowed: list[str], stats: Any) -> None:
        self.allowed = [ipaddress.ip_network(network, strict=False) for network in allowed]
        self.stats = stats
        self._resolved: dict[str, tuple[float, list[str]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrivateTargetGuard:
        if not crawler.settings.getbool("TRAWL_GUARD_PRIVATE_TARGETS"):
            raise NotConfigured("the private-target guard is off for this crawl")
        return cls(allowed=crawler.settings.getlist("TRAWL_PRIVATE_TARGETS_ALLOWED"), stats=crawler.stats)

    async def process_request(self, request: Request) -> None:
        host = urlparse_cached(request).hostname or ""
        addresses = await self._addresses(host)
        refused = [address for address in addresses if not address_allowed(address, self.allowed)]
        if not addresses or refused:
            self.stats.inc_value("guard/refused")
            why = f"resolves to {refused[0]}" if refused else "does not resolve"
            raise PrivateTargetRefused(f"{request.url}: host {host!r} {why}; this job may only fetch public addresses")
        return None

    async def _addresses(self, host: str) -> list[str]:
        try:
            return [ipaddress.ip_address(host.strip("[]")).compressed]
        except ValueError:
            pass
        cached = self._resolved.get(host)
        if cached and time.monotonic() - cached[0] < RESOLVE_CACHE_SECONDS:
            return cached[1]
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            infos = []
        addresses = sorted({info[4][0] for info in infos})
        self._resolved[host] = (time.monotonic(), addresses)
        return addresses
