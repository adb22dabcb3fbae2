"""What the throttle middleware needs around it: when a crawl is closing, which egress a request leaves from, what
says a site is overloaded, and the middlewares' options from the crawl's settings."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import DownloadFailedError, DownloadTimeoutError, IgnoreRequest, NotConfigured
from scrapy.settings import BaseSettings
from twisted.internet.error import ConnectionLost, TCPTimedOutError
from twisted.internet.error import TimeoutError as TxTimeoutError
from twisted.web._newclient import ResponseNeverReceived

from project.redis import REDIS_SETTING
from project.web.unavailable import unavailable_dependency

PAUSE_STATUSES = (429, 503)
# Exceptions that say the site is overloaded, for the adaptive controller; DNS errors and refusals say nothing of it.
OVERLOAD_EXCEPTIONS = (
    DownloadTimeoutError,
    DownloadFailedError,
    TimeoutError,
    TxTimeoutError,
    TCPTimedOutError,
    ConnectionLost,
    ResponseNeverReceived,
)


class CrawlClosing(IgnoreRequest):
    """The crawl is stopping (cancel, timeout, watchdog): a request still waiting for a token is dropped, not sent."""


def crawl_closing(crawler: Crawler) -> bool:
    """True once the engine was asked to stop or its spider started closing (requests may still be in flight)."""
    engine = getattr(crawler, "_engine", None)  # Crawler.engine raises before the crawl starts
    if engine is None:
        return False
    slot = getattr(engine, "_slot", None)  # Scrapy keeps "closing" on its private slot; no public flag says it
    return not engine.running or (slot is not None and slot.closing is not None)


def dependency_away(exc: Exception) -> str | None:
    """Which of Trawl's own dependencies `exc` says is away: "redis" (any Redis error) or "database"; else None."""
    return "redis" if isinstance(exc, redis.RedisError) else unavailable_dependency(exc)


class DomainBlocked(IgnoreRequest):
    """The request's domain is blocked by its throttle rule: dropped before it leaves."""


def egress_of(request: Request, default: str) -> str:
    """The egress IP label a request leaves from: its proxy's label, else the proxy's host, else the worker's."""
    if request.meta.get("trawl_egress"):
        return request.meta["trawl_egress"]
    proxy = request.meta.get("proxy")
    if proxy:
        return urlsplit(proxy if "://" in proxy else f"http://{proxy}").hostname or default
    return default


def load_rules() -> bool:
    """Mirror the throttle rules into Redis (in a worker thread: it reads the database)."""
    from django.db import connection

    from throttling.services import throttle_rules_load

    try:
        return throttle_rules_load()
    finally:
        connection.close()  # a thread of the pool: no connection kept between its rare reads (docs/deploy.md)


def check_rules() -> bool:
    """Reload the rule mirror if the database's rules changed behind the services' back (one process per period)."""
    from django.db import connection

    from throttling.services import throttle_rules_check

    try:
        return throttle_rules_check()
    finally:
        connection.close()


def throttle_options(settings: BaseSettings) -> dict[str, Any]:
    """ThrottleMiddleware's arguments from the crawl's settings. Politeness is not a scraper's to turn off: the
    project's values are pinned there (runtime.settings.compose)."""
    if not settings.getbool("TRAWL_THROTTLE_ENABLED"):
        raise NotConfigured  # the project's choice (TRAWL_THROTTLE_ENABLED): no message, no WARNING in every job
    return {
        "buckets": throttle_buckets_of(settings),
        "controller": _controller(settings),
        "redis_url": settings.get(REDIS_SETTING),
        "egress": settings.get("TRAWL_EGRESS_LABEL"),
        "max_sleep": settings.getfloat("TRAWL_THROTTLE_MAX_SLEEP"),
        "max_pause": settings.getfloat("TRAWL_THROTTLE_MAX_PAUSE"),
        "patience": settings.getfloat("TRAWL_INFRA_PATIENCE_SECONDS"),
        "rules_check_seconds": settings.getfloat("TRAWL_THROTTLE_RULES_TTL"),
    }


def requeue_options(settings: BaseSettings) -> dict[str, Any]:
    """PoliteRequeueMiddleware's arguments: off with the throttle or the adaptive controller, project-wide."""
    controller = _controller(settings) if settings.getbool("TRAWL_THROTTLE_ENABLED") else None
    if controller is None:
        raise NotConfigured  # no controller to choose a delay: Scrapy's retries, as before
    return {"controller": controller, "redis_url": settings.get(REDIS_SETTING)}


def throttle_buckets_of(settings: BaseSettings) -> Any:
    """The cluster's buckets as a crawl's settings configure them (its components read no project settings)."""
    from throttling.services import throttle_buckets

    return throttle_buckets(**_bucket_options(settings))


def _bucket_options(settings: BaseSettings) -> dict[str, Any]:
    return {
        "defaults": settings.getdict("TRAWL_THROTTLE_DEFAULTS"),
        "slot_lease": settings.getfloat("TRAWL_THROTTLE_SLOT_LEASE"),
        "max_pause": settings.getfloat("TRAWL_THROTTLE_MAX_PAUSE"),
        "adaptive": settings.getdict("TRAWL_THROTTLE_ADAPTIVE"),
    }


def _controller(settings: BaseSettings) -> Any:
    from throttling.services import throttle_controller

    return throttle_controller(**_bucket_options(settings))
