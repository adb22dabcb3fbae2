"""Turning a finished crawl's Scrapy stats into Trawl's job stats and error class. Pure functions.

ErrorClass is every reason a job fails, the crawl's verdicts and the job's own (routing, cancel, a lost worker):
crawls.states re-exports it for the job's model."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db import models

STATUS_PREFIX = "downloader/response_status_count/"
EXCEPTION_PREFIX = "downloader/exception_type_count/"
BLOCKING_STATUSES = {403, 429}


class ErrorClass(models.TextChoices):
    TIMEOUT = "timeout", "Timeout"
    DNS = "dns", "DNS lookup failed"
    CONNECTION = "connection", "Connection failed"
    HTTP_4XX = "http_4xx", "HTTP 4xx"
    HTTP_5XX = "http_5xx", "HTTP 5xx"
    BLOCKED = "blocked", "Blocked"
    PARSE = "parse", "Parse"
    SPIDER_ERROR = "spider_error", "Spider error"
    WORKER_LOST = "worker_lost", "Worker lost"
    CANCELLED = "cancelled", "Cancelled"
    ROUTING = "routing", "No scraper version to run"
    PACKAGE = "package", "Package environment unavailable"
    STALLED = "stalled", "Stalled (no response, no item)"
    MONITOR = "monitor", "A monitor failed the job"
    BLOCKED_TARGET = "blocked_target", "Target refused (private address)"
    REACTOR_STALLED = "reactor_stalled", "Held its process's reactor (replaced)"
    MEMORY_EXCEEDED = "memory_exceeded", "Its process grew past its memory bound on every attempt"


@dataclass(frozen=True)
class CrawlVerdict:
    error_class: str  # "" when the job succeeded
    message: str = ""
    # monitor breaches (crawls.services.monitoring), stored at the end
    alerts: list[dict[str, Any]] = field(default_factory=list)


def job_stats(scrapy_stats: dict[str, Any]) -> dict[str, Any]:
    """The numbers a user cares about, JSON-ready, from Scrapy's stats collector."""
    # robots.txt fetches are counted apart so a missing robots.txt never looks like a failed page.
    status_codes = {}
    for key, value in scrapy_stats.items():
        if key.startswith(STATUS_PREFIX):
            code = key.removeprefix(STATUS_PREFIX)
            count = value - scrapy_stats.get(f"robotstxt/response_status_count/{code}", 0)
            if count > 0:
                status_codes[code] = count
    exceptions = {
        key.removeprefix(EXCEPTION_PREFIX).rsplit(".", 1)[-1]: value
        for key, value in scrapy_stats.items()
        if key.startswith(EXCEPTION_PREFIX) and not key.endswith(".CrawlClosing")  # dropped by a stop, not failed
    }
    spider_exceptions = scrapy_stats.get("spider_exceptions/count") or sum(
        value for key, value in scrapy_stats.items() if key.startswith("spider_exceptions/")
    )
    item_errors = scrapy_stats.get("item_errors/count", 0)  # raised by item pipelines (runtime.watch.item_errors)
    return {
        "requests": scrapy_stats.get("downloader/request_count", 0) - scrapy_stats.get("robotstxt/request_count", 0),
        "pages": scrapy_stats.get("response_received_count", 0) - scrapy_stats.get("robotstxt/response_count", 0),
        "bytes": scrapy_stats.get("downloader/response_bytes", 0),
        "status_codes": status_codes,
        "download_errors": exceptions,
        "items_scraped": scrapy_stats.get("item_scraped_count", 0),
        "items_dropped": scrapy_stats.get("item_dropped_count", 0),
        "items_oversize": scrapy_stats.get("items/oversize", 0),  # of items_dropped: over the item size bounds
        "frontier_refused": scrapy_stats.get("frontier/refused", 0),  # queued entries that were not request data
        "package_messages_dropped": scrapy_stats.get("package/messages_dropped", 0),  # a child's overlong lines
        "spider_exceptions": spider_exceptions,
        "item_errors": item_errors,
        "errors": spider_exceptions + item_errors,  # what counts towards TRAWL_MAX_SPIDER_ERRORS
        "robots_forbidden": scrapy_stats.get("robotstxt/forbidden", 0),
        "refused_private": scrapy_stats.get("guard/refused", 0),  # requests the private-target guard refused
        "refused_scheme": scrapy_stats.get("schemes/refused", 0),  # requests (and redirects) not http(s): refused
        # `checked`: responses the block detector looked at (runtime.watch.blocks); `blocked`: those that were
        # blocks (403, 429, captcha page); `captcha`: captcha pages among them.
        "blocks": {
            key.removeprefix("blocks/"): value for key, value in scrapy_stats.items() if key.startswith("blocks/")
        },
        "finish_reason": scrapy_stats.get("finish_reason", ""),
        # Requests still in the scheduler: with `pages`, how much of the known frontier is done.
        "queued": max(0, scrapy_stats.get("scheduler/enqueued", 0) - scrapy_stats.get("scheduler/dequeued", 0)),
        # Politeness numbers from the throttle middleware: held_seconds (wall time the crawl was held back),
        # wait_seconds_total (summed over concurrent requests: may exceed the crawl's duration), waits, delayed...
        "throttle": {
            key.removeprefix("throttle/"): value for key, value in scrapy_stats.items() if key.startswith("throttle/")
        },
        # What an incremental source crawl did not fetch again: fetches_avoided, bytes_avoided, lastmod_skipped.
        "incremental": {
            key.removeprefix("incremental/"): value
            for key, value in scrapy_stats.items()
            if key.startswith("incremental/")
        },
        # Rendered crawls (docs/rendering.md): pages, seconds, subrequests_blocked, resources_skipped, wait_timeouts.
        "render": {
            key.removeprefix("render/"): value for key, value in scrapy_stats.items() if key.startswith("render/")
        },
    }


def classify(
    *,
    stats: dict[str, Any],
    stopped_because: str = "",
    crawl_error: str = "",
    first_spider_error: str = "",
    max_spider_errors: int = 0,
    max_spider_error_share: float = 0.0,
    block_share: float = 0.5,
) -> CrawlVerdict:
    """Decide whether a crawl failed, and why. Ordered from the most to the least specific cause."""
    if stopped_because == "cancelled":
        return CrawlVerdict(ErrorClass.CANCELLED, "cancelled on request")
    if stopped_because == "lost":
        return CrawlVerdict(ErrorClass.WORKER_LOST, "this worker no longer owns the job")
    if stopped_because == "timeout":
        return CrawlVerdict(
            ErrorClass.TIMEOUT, f"stopped after the job timeout ({stats.get('pages', 0)} pages fetched)"
        )
    if crawl_error:
        return CrawlVerdict(ErrorClass.SPIDER_ERROR, crawl_error)
    errors = spider_errors(stats)
    if errors > spider_errors_allowed(stats, most=max_spider_errors, share=max_spider_error_share):
        where = f"{stats.get('spider_exceptions', 0)} in callbacks, {stats.get('item_errors', 0)} in item pipelines"
        return CrawlVerdict(
            ErrorClass.SPIDER_ERROR, f"spider raised {errors} time(s) ({where}); first: {first_spider_error}"
        )
    codes = Counter({int(code): n for code, n in stats.get("status_codes", {}).items()})
    refused = stats.get("refused_private", 0)
    blocks = stats.get("blocks") or {}
    blocked, responses = blocks.get("blocked", 0), blocks.get("checked", blocks.get("responses", 0))
    # A 429 whose page the throttle sent back for later (throttling/requeue.py) was answered again: not a block.
    polite = (stats.get("throttle") or {}).get("requeued_429", 0)
    blocked, responses = max(0, blocked - polite), max(0, responses - polite)
    if blocked and blocked_share(responses=responses, blocked=blocked) >= block_share:
        captchas = f", {blocks['captcha']} captcha page(s)" if blocks.get("captcha") else ""
        return CrawlVerdict(ErrorClass.BLOCKED, f"the site blocked {blocked} of {responses} responses{captchas}")
    if refused and not any(200 <= code < 300 for code in codes):
        return CrawlVerdict(ErrorClass.BLOCKED_TARGET, f"refused {refused} request(s) to private addresses")
    schemes = stats.get("refused_scheme", 0)
    if schemes and not any(200 <= code < 300 for code in codes):
        return CrawlVerdict(ErrorClass.BLOCKED_TARGET, f"refused {schemes} request(s) with a scheme other than http(s)")
    if any(code < 400 for code in codes):
        return CrawlVerdict("")
    return _no_good_page(codes, stats)


def _no_good_page(codes: Counter, stats: dict[str, Any]) -> CrawlVerdict:
    """Every request failed: name the failure that explains the crawl best."""
    errors = stats.get("download_errors", {})
    if errors:
        if any("DomainBlocked" in name for name in errors):
            return CrawlVerdict(ErrorClass.BLOCKED, "the domain is blocked in Trawl's throttle rules")
        # Twisted's DNSLookupError; Scrapy >= 2.13 reports it as CannotResolveHostError.
        if any(dns_name in name for name in errors for dns_name in ("DNSLookupError", "CannotResolveHostError")):
            return CrawlVerdict(ErrorClass.DNS, f"DNS lookup failed: {_summary(errors)}")
        return CrawlVerdict(ErrorClass.CONNECTION, f"no connection: {_summary(errors)}")
    if codes:
        blocking = sum(n for code, n in codes.items() if code in BLOCKING_STATUSES)
        if blocking:
            return CrawlVerdict(ErrorClass.BLOCKED, f"the site refused us: {_summary(codes)}")
        if any(code >= 500 for code in codes):
            return CrawlVerdict(ErrorClass.HTTP_5XX, f"server errors: {_summary(codes)}")
        return CrawlVerdict(ErrorClass.HTTP_4XX, f"client errors: {_summary(codes)}")
    if stats.get("robots_forbidden"):
        return CrawlVerdict(ErrorClass.BLOCKED, "robots.txt forbids every URL of this crawl")
    if not stats.get("requests"):
        return CrawlVerdict(
            ErrorClass.SPIDER_ERROR, "the spider made no requests (does it read `url` or `start_urls`?)"
        )
    return CrawlVerdict("")


def spider_errors(stats: dict[str, Any]) -> int:
    """Exceptions of the spider's callbacks and its item pipelines (stats of a job stored before item errors were
    counted have `spider_exceptions` alone)."""
    return stats.get("errors", stats.get("spider_exceptions", 0))


def spider_errors_allowed(stats: dict[str, Any], *, most: int, share: float) -> int:
    """How many exceptions a crawl may raise and still succeed: `most`, or `share` of the pages and items it
    handled (each a callback's or the pipelines' chance to raise) if that is more."""
    handled = stats.get("pages", 0) + stats.get("items_scraped", 0) + stats.get("items_dropped", 0)
    return max(int(most), int(share * (handled + stats.get("item_errors", 0))))


def blocked_share(*, responses: int, blocked: int) -> float:
    return blocked / responses if responses else 0.0


def _summary(counts: dict) -> str:
    return ", ".join(f"{key} ×{value}" for key, value in sorted(counts.items(), key=lambda kv: -kv[1]))
