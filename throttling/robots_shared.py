"""Scrapy's RobotsTxtMiddleware with each host's robots.txt read once per TRAWL_THROTTLE_ROBOTS_TTL by the whole fleet.

Scrapy fetches a host's robots.txt once per crawl: a fleet running a thousand small jobs of one site fetches it a
thousand times, and each job's throttle (throttling/robots.py) re-reads what it asks for. Here the first crawl to
fetch it keeps its body in Redis next to the host's throttle keys, for TRAWL_THROTTLE_ROBOTS_TTL seconds; every other
crawl, on any worker, builds its parser from that copy and fetches nothing. Only answers a site meant as its policy
are kept (2xx, and 4xx, which Scrapy reads as "allow all"); a 5xx or a network error is fetched again by the next
crawl. A body is kept only up to ROBOTS_MAX_BYTES (Google reads 500 KiB of one). A packaged crawl's child reads the
copies and keeps none (its Redis user may not write them: a copy it wrote would be what every crawl of the site obeys).

Scrapy's own middleware claims a host (a Deferred in `_parsers`) before it fetches, and its other requests wait on
that claim: the shared copy is therefore looked up once per host (the first request's lookup, awaited by the others)
and adopted only while the host is unclaimed. Adopting it over a claim would leave the claim's waiters hanging for
good and fail the fetch as it lands (Scrapy asserts its claim is still there): requests lost to a Redis blink.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler

logger = logging.getLogger("trawl.throttle")
ROBOTS_MAX_BYTES = 500 * 1024


class SharedRobotsTxtMiddleware(RobotsTxtMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        from project.redis import REDIS_SETTING
        from throttling.crawling import throttle_buckets_of

        # A crawl outside Trawl's composition (a test's bare Scrapy, no Trawl Redis) reads robots.txt as Scrapy does.
        self.redis_url = crawler.settings.get(REDIS_SETTING)
        self.buckets = throttle_buckets_of(crawler.settings) if self.redis_url else None
        self.ttl = max(1, int(crawler.settings.getfloat("TRAWL_THROTTLE_ROBOTS_TTL") or 1))
        self._lookups: dict[str, asyncio.Future] = {}  # netloc -> its one lookup of the shared copy

    def _key(self, scheme: str, netloc: str) -> str:
        return self.buckets.robots_file_key(scheme, netloc.rsplit(":", 1)[0].strip("[]").lower(), netloc)

    async def _client(self) -> Any:
        from project.redis import loop_redis

        return loop_redis(self.redis_url, decode=False)  # the reactor loop's, shared by its crawls

    async def robot_parser(self, request: Request) -> Any:
        url = urlparse_cached(request)
        if self.buckets is not None and url.netloc not in self._parsers:
            lookup = self._lookups.get(url.netloc)
            if lookup is None:
                lookup = asyncio.ensure_future(self.shared_adopt(url.scheme, url.netloc))
                self._lookups[url.netloc] = lookup
            await asyncio.shield(lookup)  # a request cancelled meanwhile does not cancel the others' lookup
        return await super().robot_parser(request)

    async def shared_adopt(self, scheme: str, netloc: str) -> None:
        """The fleet's copy of the host's robots.txt as this crawl's parser, if there is one and Scrapy has not
        claimed the host meanwhile (its fetch under way, or done)."""
        body = await self._shared(scheme, netloc)
        if body is not None and netloc not in self._parsers:
            self._parsers[netloc] = build_from_crawler(self._parserimpl, self.crawler, body)
            self._stats.inc_value("robotstxt/shared")

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        await super()._parse_robots(response, netloc, request)
        if self.buckets is not None and response.status < 500 and len(response.body) <= ROBOTS_MAX_BYTES:
            body = response.body if response.status < 300 else b""  # 4xx: allow all, as Scrapy reads it
            try:
                client = await self._client()
                await client.set(self._key(urlparse_cached(response).scheme, netloc), body, ex=self.ttl)
            except redis.exceptions.NoPermissionError:
                logger.debug("robots.txt of %s not shared: this crawl's Redis user reads the copies only", netloc)
            except Exception as exc:  # Redis away: this crawl has its parser; the next one fetches again
                logger.warning("robots.txt of %s not shared: %s: %s", netloc, type(exc).__name__, exc)

    async def _shared(self, scheme: str, netloc: str) -> bytes | None:
        try:
            client = await self._client()
            return await client.get(self._key(scheme, netloc))
        except Exception as exc:  # Redis away: fetch it as Scrapy does
            logger.warning("shared robots.txt of %s unreadable: %s: %s", netloc, type(exc).__name__, exc)
            return None
