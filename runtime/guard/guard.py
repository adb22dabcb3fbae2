"""The private-target guard at fetch time: every request a non-admin job makes — its start URL, followed links and
redirects (Scrapy schedules a redirect as a new request, so it comes through here too) — is checked by the addresses
its host resolves to now, not by what the start URL looked like at submission. Private, loopback, link-local and
other non-public addresses (NAT64, 6to4, Teredo and IPv4-mapped forms of them too) are refused (error class
`blocked_target` when nothing else was fetched), with a clear reason in the log and `guard/refused` in the stats.

The guard resolves through the crawl's resolver (runtime/guard/resolver.py), the one its connections use: the
download handler connects to the addresses checked here, never to a second answer (DNS rebinding).

On when TRAWL_BLOCK_PRIVATE_TARGETS is (production settings) and the job's requester is not an admin; the runner
sets TRAWL_GUARD_PRIVATE_TARGETS per crawl. TRAWL_PRIVATE_TARGETS_ALLOWED lists networks an operator trusts anyway.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from runtime.guard.resolver import CrawlResolver, crawl_resolver

logger = logging.getLogger("trawl.guard")


class PrivateTargetRefused(IgnoreRequest):
    """The request's host is, or resolves to, an address this job may not reach."""


class PrivateTargetGuard:
    def __init__(self, *, resolver: CrawlResolver, stats: Any) -> None:
        self.resolver = resolver
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrivateTargetGuard:
        resolver = crawl_resolver(crawler)
        if resolver is None or not resolver.guarded:
            logger.debug("the private-target guard is off for this crawl")
            raise NotConfigured  # off by design: with a message, Scrapy would log a WARNING in every job
        return cls(resolver=resolver, stats=crawler.stats)

    async def process_request(self, request: Request) -> None:
        host = urlparse_cached(request).hostname or ""
        resolution = await self.resolver.resolve(host)
        if resolution.reason:
            self.stats.inc_value("guard/refused")
            raise PrivateTargetRefused(f"{request.url}: {resolution.reason}; this job may only fetch public addresses")
        return None
