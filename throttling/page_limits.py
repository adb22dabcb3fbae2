"""A domain rule's `max_pages_per_job`: one crawl fetches at most that many pages of the domain, then drops the rest.

The crawl reads the rule that governs a host from the Redis mirror (the host's own, else its registered domain's)
once per host every RULE_REFRESH_SECONDS, counts the pages it lets through per rule, and drops a page beyond the limit
before it takes a token (stat `throttle/page_limit_reached`, and a log line naming the domain once). Counted per crawl
process: a job's shards (parallelism) each count their own pages.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from throttling.buckets import Limits, TokenBuckets, registered_domain

COUNTED_META = "trawl_page_counted"
RULE_REFRESH_SECONDS = 15.0  # a rule changed in the admin reaches a running crawl's page limit this late at most


class PageLimitReached(IgnoreRequest):
    """The job fetched as many pages of the domain as its rule's `max_pages_per_job`: this one is not fetched."""


class HostRules:
    """Which rule governs a host (its name and limits, from the Redis mirror) and the pages this crawl let through."""

    def __init__(self, *, buckets: TokenBuckets) -> None:
        self.buckets = buckets
        self._rules: dict[str, tuple[float, str, Limits | None]] = {}  # host -> (read at, owner, rule or None)
        self._reading: dict[str, asyncio.Future] = {}
        self.pages: Counter[str] = Counter()  # by owner

    async def rule_of(self, client: Any, host: str) -> tuple[str, Limits | None]:
        """The name whose rule and buckets govern `host` (the exact host's when it has a rule, else its registered
        domain) and that rule (None: the defaults)."""
        host = host.lower().rstrip(".")
        known = self._rules.get(host)
        if known is not None and time.monotonic() - known[0] < RULE_REFRESH_SECONDS:
            return known[1], known[2]
        # Requests of a host that come together share one read, and so still reach the buckets together.
        if host not in self._reading:
            self._reading[host] = asyncio.ensure_future(self._read(client, host))
            self._reading[host].add_done_callback(lambda _done: self._reading.pop(host, None))
        return await asyncio.shield(self._reading[host])

    async def _read(self, client: Any, host: str) -> tuple[str, Limits | None]:
        domain = registered_domain(host)
        own, registered = await client.mget(self.buckets.rule_key(host), self.buckets.rule_key(domain))
        owner, value = (host, own) if own else (domain, registered)
        rule = Limits.from_redis(value) if value else None
        self._rules[host] = (time.monotonic(), owner, rule)
        return owner, rule

    def admit(self, request: Request, *, owner: str, rule: Limits | None) -> bool:
        """Count the request as one of the owner's pages, or say it is one too many. robots.txt is not a page."""
        if rule is None or not rule.max_pages_per_job or request.url.endswith("/robots.txt"):
            return True
        if request.meta.get(COUNTED_META):  # a page the site refused, back from the frontier: counted already
            return True
        if self.pages[owner] >= rule.max_pages_per_job:
            return False
        self.pages[owner] += 1
        request.meta[COUNTED_META] = True
        return True
