"""Scrapy extensions that watch a running crawl: stall detection, the error-rate monitor, field coverage.

They stop a crawl by closing the spider with their own finish reason; crawls.services.monitoring turns those reasons
into the job's error class (`stalled`, `monitor`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from project.errors import TrawlError
from registry.monitors import error_rate, monitors_parse
from runtime.bridge.handoff import item_passed
from runtime.bridge.outcome import job_stats

logger = logging.getLogger("trawl.watchdogs")
STALLED_REASON = "trawl_stalled"
ERROR_RATE_REASON = "trawl_error_rate"
COVERAGE_MAX_FIELDS = 100  # fields counted per item: an item with thousands of keys must not bloat the stats


def is_stalled(*, idle: float, limit: float) -> bool:
    return limit > 0 and idle >= limit


def is_erroring(*, stats: dict[str, Any], max_rate: float, min_requests: int) -> bool:
    """Enough requests to judge, and more of them failed than the monitor allows."""
    rate = error_rate(stats)
    return stats.get("requests", 0) >= min_requests and rate is not None and rate > max_rate


def _close(crawler: Any, reason: str) -> None:
    if crawler.engine is not None:
        deferred_from_coro(crawler.engine.close_spider_async(reason=reason))


class _Periodic:
    """Runs `check` every `every` seconds between spider_opened and spider_closed."""

    every = 1.0

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.task = LoopingCall(self.check)
        self.closing = False
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    def opened(self, spider: Any) -> None:
        self.task.start(self.every, now=False)

    def closed(self, spider: Any, reason: str) -> None:
        if self.task.running:
            self.task.stop()

    def check(self) -> None:
        raise NotImplementedError

    def stop_crawl(self, reason: str) -> None:
        self.closing = True
        _close(self.crawler, reason)


class StallWatchdog(_Periodic):
    """Closes the spider (reason `trawl_stalled`) after TRAWL_STALL_SECONDS without a response or an item."""

    def __init__(self, crawler: Any, *, seconds: float) -> None:
        if seconds <= 0:
            logger.debug("stall watchdog off: TRAWL_STALL_SECONDS is 0")
            raise NotConfigured  # off by design: with a message, Scrapy would log a WARNING in every job
        super().__init__(crawler)
        self.seconds = seconds
        self.every = min(5.0, max(0.5, seconds / 4))
        self.last_activity = time.monotonic()
        crawler.signals.connect(self.activity, signal=signals.response_received)
        crawler.signals.connect(self.activity, signal=item_passed)

    @classmethod
    def from_crawler(cls, crawler: Any) -> StallWatchdog:
        return cls(crawler, seconds=crawler.settings.getfloat("TRAWL_STALL_SECONDS"))

    def opened(self, spider: Any) -> None:
        self.last_activity = time.monotonic()
        # The clock starts again once every spider_opened handler has run: some block the reactor before the first
        # request (an S3 feed builds its boto3 client there, seconds on a busy machine), and that is not the site.
        from twisted.internet import reactor  # the running one (importing it at module level would install one)

        reactor.callLater(0, self.activity)
        super().opened(spider)

    def activity(self, *args: Any, **kwargs: Any) -> None:
        self.last_activity = time.monotonic()

    def check(self) -> None:
        idle = time.monotonic() - self.last_activity
        if not self.closing and is_stalled(idle=idle, limit=self.seconds):
            self.crawler.stats.set_value("watchdog/stalled_seconds", self.seconds)
            logger.warning("no response and no item for %.0f s (TRAWL_STALL_SECONDS=%s): stopping", idle, self.seconds)
            self.stop_crawl(STALLED_REASON)


class ErrorRateWatchdog(_Periodic):
    """Closes the spider (reason `trawl_error_rate`) once its TRAWL_MONITORS max_error_rate is exceeded.

    Checked on every response as well as every second: a local or fast site answers hundreds of errors within one
    periodic tick, and "stopped early" must mean early in requests, not in seconds."""

    def __init__(self, crawler: Any, *, max_rate: float, min_requests: int) -> None:
        super().__init__(crawler)
        self.max_rate, self.min_requests = max_rate, min_requests
        crawler.signals.connect(self.response_received, signal=signals.response_received)

    @classmethod
    def from_crawler(cls, crawler: Any) -> ErrorRateWatchdog:
        try:
            monitor = monitors_parse(crawler.settings.getdict("TRAWL_MONITORS")).get("max_error_rate")
        except TrawlError as exc:
            raise NotConfigured(exc.message) from None
        if monitor is None:
            raise NotConfigured  # off by design (no max_error_rate monitor): no message, so no WARNING per job
        min_requests = crawler.settings.getint("TRAWL_MONITOR_MIN_REQUESTS")
        return cls(crawler, max_rate=float(monitor.value), min_requests=min_requests)

    def response_received(self, *args: Any, **kwargs: Any) -> None:
        self.check()

    def check(self) -> None:
        if self.closing:
            return
        stats = job_stats(self.crawler.stats.get_stats())
        if is_erroring(stats=stats, max_rate=self.max_rate, min_requests=self.min_requests):
            rate = error_rate(stats)
            self.crawler.stats.set_value("watchdog/error_rate", rate)
            logger.warning(
                "error rate %.2f > max_error_rate %.2f after %s requests: stopping",
                rate,
                self.max_rate,
                stats["requests"],
            )
            self.stop_crawl(ERROR_RATE_REASON)


class FieldCoverage:
    """Stats `coverage/items` and `coverage/field/<name>` (items with a non-empty value) for min_coverage."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> FieldCoverage:
        extension = cls(crawler.stats)
        crawler.signals.connect(extension.item_passed, signal=item_passed)
        return extension

    def item_passed(self, data: dict[str, Any]) -> None:
        self.stats.inc_value("coverage/items")
        for number, (name, value) in enumerate(data.items()):
            if number >= COVERAGE_MAX_FIELDS:
                break
            if value not in (None, "", [], {}):
                self.stats.inc_value(f"coverage/field/{name}")
