"""A site's pause (a 429/503 with Retry-After): shared with every worker through the domain's bucket, and noted in
this process, where requests that took their token ahead (throttling/buckets.lua) sleep until it comes: one that
wakes after its site asked for the pause asks again instead of going. Errors (5xx, timeouts) void such a token too,
once per request, when ERRORS_TO_VOID of them came since it was taken: a site refusing at this rate will see the
adaptive controller cut it (its third error in a window does), and the bucket, whose schedule the void tokens already
filled, hands out the next ones at the cut rate. One stray error voids nothing."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import redis
from scrapy import Request
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.httpobj import urlparse_cached

from throttling.buckets import TokenBuckets, retry_after_seconds
from throttling.crawling import PAUSE_STATUSES
from throttling.suffixes import registered_domain

logger = logging.getLogger("trawl.throttle")
REMEMBERED_SECONDS = 60.0  # longer than any token is taken ahead (TRAWL_THROTTLE_MAX_SLEEP)
ERRORS_TO_VOID = 2
# Registered domain → when this process last saw it ask for a pause (the last time), and answer an error (the last
# ERRORS_TO_VOID times). Every crawl of a process shares its reactor thread, which alone reads and writes these.
_paused_at: dict[str, deque[float]] = {}
_erred_at: dict[str, deque[float]] = {}


def token_void(host: str, asked: float, *, after_error: bool) -> bool:
    """Whether a token asked for at `asked` (time.monotonic) and taken ahead must not be used: `host`'s site asked for
    a pause since, or (when `after_error`: a request's first void only, so a site erring on every answer is still
    crawled, at its cut rate) answered ERRORS_TO_VOID errors since, as seen in this process."""
    domain = registered_domain(host)
    return (after_error and _since(_erred_at, domain, asked, ERRORS_TO_VOID)) or _since(_paused_at, domain, asked, 1)


def error_seen(host: str) -> None:
    _note(_erred_at, host, keep=ERRORS_TO_VOID)


def _since(seen: dict[str, deque[float]], domain: str, asked: float, times: int) -> bool:
    """Whether `domain` was seen at least `times` times at or after `asked` (the deque keeps its last `times`)."""
    last = seen.get(domain, ())
    return len(last) == times and last[0] >= asked


def _note(seen: dict[str, deque[float]], host: str, *, keep: int) -> None:
    now = time.monotonic()
    for domain in [domain for domain, times in seen.items() if now - times[-1] > REMEMBERED_SECONDS]:
        del seen[domain]
    seen.setdefault(registered_domain(host), deque(maxlen=keep)).append(now)


async def pause_if_asked(
    buckets: TokenBuckets,
    client: Callable[[], Awaitable[Any]],
    request: Request,
    response: Response,
    *,
    max_pause: float,
    stats: StatsCollector,
) -> None:
    """A 429/503 with Retry-After pauses its domain for every worker (at most `max_pause` seconds); `client()` gives
    the crawl's Redis client, asked for only then."""
    if response.status not in PAUSE_STATUSES:
        return
    seconds = retry_after_seconds(response.headers.get(b"Retry-After"), now=time.time())
    host = urlparse_cached(request).hostname
    if not seconds or not host:
        return
    seconds = min(seconds, max_pause)
    _note(_paused_at, host, keep=1)
    try:
        await buckets.pause_async(await client(), host=host, seconds=seconds)
    except redis.RedisError as exc:  # sharing the pause is best effort; the response is the site's
        logger.warning("throttle: could not pause %s (redis: %s)", host, exc)
        return
    stats.inc_value("throttle/paused")
    logger.info("throttle: %s answered %s, pausing it for %.0fs", host, response.status, seconds)
