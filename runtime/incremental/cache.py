"""Incremental source crawls: do not fetch again what did not change since the source's last run.

Scrapy's HttpCacheMiddleware with an RFC 2616 policy, over a cache in Redis that every worker shares, one cache per
source. The first time a URL answers 200 with an ETag or a Last-Modified, its response is stored; every later request
for it carries `If-None-Match` / `If-Modified-Since`, and a 304 hands the spider the stored page, so an unchanged list
page still leads to its items (which then count as unchanged). The policy always revalidates: a re-crawl exists to
see changes, so no heuristic freshness ever skips asking the site; and a 5xx is the site's error, not a reason to
serve the old page. Stats: `incremental/fetches_avoided` (304s) and `incremental/bytes_avoided` (their bodies).

On for source crawls (the runner sets TRAWL_INCREMENTAL_SCOPE); a scraper, version or source opts out with
`TRAWL_INCREMENTAL: false`. A request opts out with `meta["dont_cache"]`. See docs/incremental.md.
"""

from __future__ import annotations

import base64
import json
import logging
import zlib
from typing import Any

import redis
from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.httpcache import HttpCacheMiddleware
from scrapy.exceptions import NotConfigured
from scrapy.extensions.httpcache import RFC2616Policy
from scrapy.http import Response
from scrapy.responsetypes import responsetypes
from scrapy.settings import BaseSettings

from project.redis import REDIS_SETTING, loop_redis

SCOPE_SETTING = "TRAWL_INCREMENTAL_SCOPE"  # the Redis key prefix of this crawl's cache; set by the runner
# The most a cached entry inflates to: a packaged version's child may write its source's cache, which a later crawl in a
# worker process reads. Past it, or not a response this module wrote, an entry is a miss (the page is fetched again).
MAX_ENTRY_BYTES = 256 * 1024 * 1024
STATS = "incremental"
logger = logging.getLogger("trawl.incremental")


def incremental_on(settings: BaseSettings | dict[str, Any]) -> bool:
    """True for a crawl that has a cache scope (a source's) and did not opt out."""
    value = settings.get("TRAWL_INCREMENTAL")
    on = value if isinstance(value, bool) else str(value).lower() not in ("0", "false", "no", "off")
    return bool(on and settings.get(SCOPE_SETTING))


class AlwaysRevalidatePolicy(RFC2616Policy):
    """RFC 2616 with validators only: store 200s that carry ETag or Last-Modified; never trust freshness, always ask
    with the validators; only a 304 keeps the stored page."""

    def should_cache_response(self, response: Response, request: Request) -> bool:
        has_validator = b"ETag" in response.headers or b"Last-Modified" in response.headers
        return response.status == 200 and has_validator and super().should_cache_response(response, request)

    def is_cached_response_fresh(self, cachedresponse: Response, request: Request) -> bool:
        self._set_conditional_validators(request, cachedresponse)
        return False

    def is_cached_response_valid(self, cachedresponse: Response, response: Response, request: Request) -> bool:
        return response.status == 304


def response_dumps(response: Response) -> bytes:
    """A response as compressed JSON (never pickle: what Redis hands back is only ever data)."""
    headers = {
        key.decode("latin-1"): [value.decode("latin-1") for value in values] for key, values in response.headers.items()
    }
    record = {
        "url": response.url,
        "status": response.status,
        "headers": headers,
        "body": base64.b64encode(response.body).decode(),
    }
    return zlib.compress(json.dumps(record).encode())


def response_loads(data: bytes) -> Response | None:
    """The response `response_dumps` wrote, or None for an entry that is not one or inflates past MAX_ENTRY_BYTES."""
    try:
        inflater = zlib.decompressobj()
        text = inflater.decompress(data, MAX_ENTRY_BYTES + 1)
        if len(text) > MAX_ENTRY_BYTES:
            return None
        record = json.loads(text)
        body = base64.b64decode(record["body"], validate=True)
        headers = {str(key): [str(value) for value in values] for key, values in record["headers"].items()}
        if not isinstance(record["url"], str) or type(record["status"]) is not int:
            return None
        cls = responsetypes.from_args(headers=headers, url=record["url"], body=body)
        return cls(url=record["url"], status=record["status"], headers=headers, body=body)
    except (zlib.error, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


class RedisCacheStorage:
    """Scrapy's cache-storage interface over Redis, one hash-free key per request fingerprint under the scope.

    Scrapy calls storages synchronously from the reactor thread; Redis must not block it. So the middleware fetches
    the entry asynchronously before the cache looks (`prefetch`), and writes queued by `store_response` are sent
    asynchronously right after (`flush`)."""

    def __init__(self, *, redis_url: str, scope: str, ttl: int) -> None:
        self.redis_url = redis_url
        self.scope = scope
        self.ttl = ttl
        self.pending: list[tuple[str, bytes]] = []
        self._fingerprint: Any = None

    def key(self, request: Request) -> str:
        return f"{self.scope}:{self._fingerprint(request).hex()}"

    def open_spider(self, spider: Spider) -> None:
        self._fingerprint = spider.crawler.request_fingerprinter.fingerprint

    def close_spider(self, spider: Spider) -> None:
        pass

    def retrieve_response(self, spider: Spider, request: Request) -> Response | None:
        data = request.meta.pop("_trawl_cache_entry", None)
        return response_loads(data) if data else None

    def store_response(self, spider: Spider, request: Request, response: Response) -> None:
        self.pending.append((self.key(request), response_dumps(response)))

    async def prefetch(self, request: Request) -> None:
        data = await (await self.client()).get(self.key(request))
        if data:
            request.meta["_trawl_cache_entry"] = data

    async def flush(self) -> None:
        pending, self.pending = self.pending, []
        if pending:
            async with (await self.client()).pipeline(transaction=False) as pipe:
                for key, data in pending:
                    pipe.set(key, data, ex=self.ttl)
                await pipe.execute()

    async def client(self) -> Any:
        return loop_redis(self.redis_url, decode=False)  # the running loop's, shared by its crawls


class IncrementalCacheMiddleware(HttpCacheMiddleware):
    """HttpCacheMiddleware over RedisCacheStorage with AlwaysRevalidatePolicy, counting what 304s saved.

    Sits below DownloaderStats (850), so `downloader/response_bytes` (a job's `bytes`) counts what really came over
    the wire, not the stored pages handed back."""

    def __init__(self, *, storage: RedisCacheStorage, policy: RFC2616Policy, stats: Any) -> None:
        self.storage = storage
        self.policy = policy
        self.ignore_missing = False
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IncrementalCacheMiddleware:
        settings = crawler.settings
        if not incremental_on(settings):
            logger.debug("incremental fetching off: not a source crawl, or TRAWL_INCREMENTAL is off")
            raise NotConfigured  # off by design: with a message, Scrapy would log a WARNING in every job
        storage = RedisCacheStorage(
            redis_url=settings.get(REDIS_SETTING),
            scope=settings.get(SCOPE_SETTING),
            ttl=settings.getint("TRAWL_INCREMENTAL_TTL"),
        )
        middleware = cls(storage=storage, policy=AlwaysRevalidatePolicy(settings), stats=crawler.stats)
        middleware.crawler = crawler
        from scrapy import signals

        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    async def process_request(self, request: Request) -> Request | Response | None:
        if not request.meta.get("dont_cache"):
            try:
                await self.storage.prefetch(request)
            except redis.RedisError:
                self.stats.inc_value(f"{STATS}/cache_errors")  # a miss: the page is fetched in full
        return super().process_request(request)

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        result = super().process_response(request, response)
        if response.status == 304 and result is not response:
            self.stats.inc_value(f"{STATS}/fetches_avoided")
            self.stats.inc_value(f"{STATS}/bytes_avoided", len(result.body))
        try:
            await self.storage.flush()
        except redis.RedisError:
            self.stats.inc_value(f"{STATS}/cache_errors")
        return result
