"""Politeness that loses no page: a request the site refused for being overloaded (429, 503, a timeout, a lost
connection) goes back to the job's frontier with a delay the adaptive controller chooses, instead of spending
Scrapy's retries at once while the controller is still slowing down.

The delay travels in the request's meta (`DELAY_META`); the frontier scheduler (runtime/frontier/scheduler.py) keeps
the request back that long, durably and still counted as the job's work, so the job neither loses it nor ends while
it waits. A page is re-queued at most `AdaptiveConfig.requeues` times; then, and on a rule with `adaptive: false`,
the response goes on to Scrapy's RetryMiddleware as it would without Trawl: pages are given up for their own reasons.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.httpobj import urlparse_cached

from project.redis import loop_redis
from throttling.buckets import retry_after_seconds
from throttling.controller import AdaptiveController
from throttling.crawling import OVERLOAD_EXCEPTIONS, requeue_options

logger = logging.getLogger("trawl.throttle")

REQUEUE_STATUSES = frozenset({429, 503})
DELAY_META = "trawl_requeue_delay"  # seconds the frontier keeps this request back before it may be taken again
REQUEUES_META = "trawl_requeues"  # how many times this page was sent back for politeness


class PoliteRequeueMiddleware:
    """Sends refused requests back to the frontier with the controller's delay. Stats: `throttle/requeued` (of which
    `throttle/requeued_429`), `throttle/requeues_exhausted` (pages left to Scrapy's retries after every re-queue),
    `throttle/requeue_errors`. `meta["dont_retry"]` or `meta["dont_throttle"]` leave a request alone."""

    def __init__(self, *, controller: AdaptiveController, redis_url: str, stats: StatsCollector) -> None:
        self.controller = controller
        self.redis_url = redis_url
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PoliteRequeueMiddleware:
        return cls(**requeue_options(crawler.settings), stats=crawler.stats)

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        if response.status not in REQUEUE_STATUSES or self._left_alone(request):
            return response
        retry_after = retry_after_seconds(response.headers.get(b"Retry-After"), now=time.time())
        return await self._requeue(request, retry_after, str(response.status)) or response

    async def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if not isinstance(exception, OVERLOAD_EXCEPTIONS) or self._left_alone(request):
            return None
        return await self._requeue(request, None, type(exception).__name__)

    @staticmethod
    def _left_alone(request: Request) -> bool:
        return bool(request.meta.get("dont_retry") or request.meta.get("dont_throttle"))

    async def _requeue(self, request: Request, retry_after: float | None, why: str) -> Request | None:
        host = urlparse_cached(request).hostname
        if not host:
            return None
        requeues = int(request.meta.get(REQUEUES_META, 0)) + 1
        try:
            client = await self._client()
            delay = await self.controller.requeue_delay_async(
                client, host=host, requeues=requeues, retry_after=retry_after
            )
        except redis.RedisError as exc:  # Redis away: Scrapy's own retries, as without the controller
            self.stats.inc_value("throttle/requeue_errors")
            logger.warning("throttle: could not re-queue %s (redis: %s)", request.url, exc)
            return None
        if delay is None:
            if requeues > self.controller.config.requeues:
                self.stats.inc_value("throttle/requeues_exhausted")
            return None
        again = request.replace(dont_filter=True)  # its fingerprint is in the seen-set already
        again.meta[REQUEUES_META] = requeues
        again.meta[DELAY_META] = delay
        self.stats.inc_value("throttle/requeued")
        if why == "429":  # answered later: not a block (the job's outcome, runtime/bridge/outcome.py)
            self.stats.inc_value("throttle/requeued_429")
        logger.debug("throttle: %s answered %s; %s back to the frontier for %.1fs", host, why, request.url, delay)
        return again

    async def _client(self) -> Any:
        return loop_redis(self.redis_url)  # the loop's: redis.asyncio connections belong to the loop that opened them
