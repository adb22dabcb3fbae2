"""What a domain rule asks of a crawl beside its buckets: at most `max_pages_per_job` pages (page_limits.py), the
site's robots.txt Crawl-delay stored for every worker (robots.py), and the rule mirror checked against the database
now and then (services.throttle_rules_check). Used by ThrottleMiddleware before it takes a request's token."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import redis
from scrapy import Request
from scrapy.statscollectors import StatsCollector

from throttling.buckets import TokenBuckets
from throttling.crawling import check_rules
from throttling.page_limits import HostRules, PageLimitReached
from throttling.robots import RobotsReader

logger = logging.getLogger("trawl.throttle")


class RuleLimits:
    def __init__(
        self, *, buckets: TokenBuckets, robots: RobotsReader | None, stats: StatsCollector, check_seconds: float
    ) -> None:
        self.rules = HostRules(buckets=buckets)
        self.robots = robots
        self.stats = stats
        self.check_seconds = check_seconds
        # The first check comes a period in: a crawl that starts finds a mirror, or loads one (STALE), at once.
        self._next_check = time.monotonic() + check_seconds
        self._reached: set[str] = set()  # rules whose page limit this crawl reached (logged once each)

    def check_due(self) -> bool:
        """True once per `check_seconds`: time to ask whether the rules changed behind the services' back."""
        if time.monotonic() < self._next_check:
            return False
        self._next_check = time.monotonic() + self.check_seconds
        return True

    async def check_rules(self) -> None:
        try:
            if await asyncio.to_thread(check_rules):
                self.stats.inc_value("throttle/rules_loaded")
        except Exception as exc:  # the database or Redis away: the mirror stays as it is until next time
            self.stats.inc_value("throttle/rules_check_errors")
            logger.warning("throttle: could not check the rules' version (%s)", exc)

    async def apply(self, client: Any, request: Request, host: str) -> None:
        """Drop a page beyond its rule's `max_pages_per_job` (PageLimitReached); on a host's first page, store what
        its robots.txt asks for, which the bucket script applies to every worker. Redis away: the take waits it out."""
        try:
            owner, rule = await self.rules.rule_of(client, host)
            if self.robots is not None and (cap := self.robots.cap_for(request)[1]) is not None:
                await self.robots.store(client, owner=owner, cap=cap)
                if rule is None or rule.obey_crawl_delay:
                    self.stats.max_value("throttle/robots_delay", round(cap.delay, 3))
        except redis.RedisError:
            return
        if self.rules.admit(request, owner=owner, rule=rule):
            return
        self.stats.inc_value("throttle/page_limit_reached")
        if owner not in self._reached:
            self._reached.add(owner)
            logger.info("throttle: %s reached its rule's %d pages per job", owner, rule.max_pages_per_job)
        raise PageLimitReached(f"{owner}: this job fetched the {rule.max_pages_per_job} pages its rule allows")
