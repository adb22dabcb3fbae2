"""robots.txt's Crawl-delay and Request-rate as a ceiling on a domain's rate, for every worker and job at once.

Scrapy's RobotsTxtMiddleware already fetches and parses each host's robots.txt once per crawl (ROBOTSTXT_OBEY); a
page request reaches the throttle only after its host's parser is ready. The throttle then reads that parser (never
fetching robots.txt again) and, once per host per crawl, stores what it asks for in Redis as a cap "rate burst
delay" next to the rule (`TokenBuckets.robots_key`, for TRAWL_THROTTLE_ROBOTS_TTL seconds): the bucket script lowers
both rates of a rule that obeys it (`obey_crawl_delay`, default true) to the cap, burst 1, so a site asking for one
request every 2 s gets one every 2 s from the whole fleet, whatever its rule says and however many jobs crawl it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.python import to_unicode

from throttling.buckets import TokenBuckets


@dataclass(frozen=True)
class RobotsCap:
    """What a robots.txt asks of a user agent: at most `rate` requests per second, one at a time."""

    rate: float
    delay: float  # seconds between requests: 1 / rate

    def as_redis(self) -> str:
        return f"{self.rate!r} 1 {self.delay!r}"

    @classmethod
    def from_redis(cls, value: str | bytes | None) -> RobotsCap | None:
        if not value:
            return None
        rate, _, delay = (value.decode() if isinstance(value, bytes) else value).split()[:3]
        return cls(float(rate), float(delay))


def robots_cap(parser: Any, user_agent: str) -> RobotsCap | None:
    """The slowest of the parser's Crawl-delay and Request-rate for `user_agent`, or None when it asks for neither.
    Protego's parser (Scrapy's default) knows both; other parsers may know Crawl-delay only, or nothing."""
    rates = []
    delay = getattr(parser, "crawl_delay", lambda _agent: None)(user_agent)
    if delay:
        rates.append(1.0 / float(delay))
    request_rate = getattr(getattr(parser, "rp", None), "request_rate", lambda _agent: None)(user_agent)
    if request_rate and request_rate.seconds:
        rates.append(request_rate.requests / request_rate.seconds)
    if not rates or min(rates) <= 0:
        return None
    rate = min(rates)
    return RobotsCap(rate=rate, delay=1.0 / rate)


class RobotsReader:
    """Finds the crawl's robots.txt parser of a request's host, once per host; says what to store for it."""

    def __init__(self, *, crawler: Crawler | None, buckets: TokenBuckets, ttl: float) -> None:
        self.crawler = crawler
        self.buckets = buckets
        self.ttl = ttl
        self._done: set[str] = set()  # hosts (netlocs) whose robots.txt was read in this crawl
        self._middleware: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *, buckets: TokenBuckets) -> RobotsReader:
        return cls(crawler=crawler, buckets=buckets, ttl=crawler.settings.getfloat("TRAWL_THROTTLE_ROBOTS_TTL"))

    def _robots_middleware(self) -> RobotsTxtMiddleware | None:
        engine = getattr(self.crawler, "_engine", None)  # Crawler.engine raises before the crawl starts
        if self._middleware is None and engine is not None:
            chain = getattr(getattr(getattr(engine, "downloader", None), "middleware", None), "middlewares", ())
            self._middleware = next((mw for mw in chain if isinstance(mw, RobotsTxtMiddleware)), False)
        return self._middleware or None

    def cap_for(self, request: Request) -> tuple[bool, RobotsCap | None]:
        """(read now, cap): read is True the first time this host's parsed robots.txt is seen in this crawl."""
        netloc = urlparse_cached(request).netloc
        if netloc in self._done or request.meta.get("dont_obey_robotstxt") or request.url.endswith("/robots.txt"):
            return False, None
        middleware = self._robots_middleware()
        if middleware is None:
            self._done.add(netloc)  # robots.txt not obeyed in this crawl (ROBOTSTXT_OBEY false): nothing to read
            return False, None
        if netloc not in middleware._parsers:  # Scrapy keeps no public handle on a host's parser
            return False, None
        parser = middleware._parsers[netloc]
        if parser is not None and hasattr(parser, "addCallback"):
            return False, None  # still being fetched: the next request of the host reads it
        self._done.add(netloc)
        if parser is None:
            return True, None
        agent = middleware._robotstxt_useragent or request.headers.get(b"User-Agent", middleware._default_useragent)
        return True, robots_cap(parser, to_unicode(agent))

    async def store(self, client: Any, *, owner: str, cap: RobotsCap) -> None:
        """Keep the cap where the bucket script of `owner` (the host with its own rule, else its domain) reads it."""
        await client.set(self.buckets.robots_key(owner), cap.as_redis(), ex=max(1, int(self.ttl)))
