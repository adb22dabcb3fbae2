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
# Registered domain → when this process last saw it ask for a pause, and its last errors. Every crawl of a process
# shares its reactor thread, which alone reads and writes these.
_paused_at: dict[str, float] = {}
_erred_at: dict[str, deque[float]] = {}


def token_void(host: str, asked: float, *, after_error: bool) -> bool:
    """Whether a token asked for at `asked` (time.monotonic) and taken ahead must not be used: `host`'s site asked for
    a pause since, or (when `after_error`: a request's first void only, so a site erring on every answer is still
    crawled, at its cut rate) answered an error since, as seen in this process."""
    domain = registered_domain(host)
    errors = _erred_at.get(domain, ())
    erred = after_error and len(errors) == ERRORS_TO_VOID and errors[0] >= asked
    return erred or _paused_at.get(domain, float("-inf")) >= asked


def error_seen(host: str) -> None:
    now, domain = time.monotonic(), registered_domain(host)
    _forget_old(_erred_at, now)
    _erred_at.setdefault(domain, deque(maxlen=ERRORS_TO_VOID)).append(now)


def _pause_seen(host: str) -> None:
    now = time.monotonic()
    _forget_old(_paused_at, now)
    _paused_at[registered_domain(host)] = now


def _forget_old(seen: dict, now: float) -> None:
    for domain in [domain for domain, at in seen.items() if now - _latest(at) > REMEMBERED_SECONDS]:
        del seen[domain]


def _latest(at: float | deque[float]) -> float:
    return at[-1] if isinstance(at, deque) else at


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
    _pause_seen(host)
    try:
        await buckets.pause_async(await client(), host=host, seconds=seconds)
    except redis.RedisError as exc:  # sharing the pause is best effort; the response is the site's
        logger.warning("throttle: could not pause %s (redis: %s)", host, exc)
        return
    stats.inc_value("throttle/paused")
    logger.info("throttle: %s answered %s, pausing it for %.0fs", host, response.status, seconds)
