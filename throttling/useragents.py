"""User-Agent rotation: each request the next User-Agent of TRAWL_USER_AGENTS."""

from __future__ import annotations

import itertools

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured


class UserAgentRotationMiddleware:
    """Give each request the next User-Agent of TRAWL_USER_AGENTS (a scraper or version may set its own list).

    Off when the list is empty, for a job that pinned one with the `useragent` option, and for a request whose
    spider set its own User-Agent header. Runs before Scrapy's UserAgentMiddleware, which only fills in blanks.
    """

    def __init__(self, *, user_agents: list[str]) -> None:
        if not user_agents:
            raise NotConfigured  # silently: most crawls rotate nothing
        self._next = itertools.cycle(user_agents).__next__
        self.pinned = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UserAgentRotationMiddleware:
        middleware = cls(user_agents=crawler.settings.getlist("TRAWL_USER_AGENTS"))
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        return middleware

    def spider_opened(self, spider: Spider) -> None:
        # The job's `useragent` option already became USER_AGENT; rotating would override it.
        self.pinned = bool((getattr(spider, "options", None) or {}).get("useragent"))

    def process_request(self, request: Request) -> None:
        if not self.pinned and not request.meta.get("dont_rotate_useragent"):
            request.headers.setdefault(b"User-Agent", self._next())
        return None
