"""A Scrapy extension that records the longest Retry-After a site sent, so the source's next run can honour it."""

from __future__ import annotations

import time
from typing import Any

from scrapy import signals
from scrapy.http import Request, Response

from throttling.buckets import retry_after_seconds

RETRY_AFTER_STAT = "scheduling/retry_after"
RETRY_AFTER_STATUSES = frozenset({429, 503})


class RetryAfterStats:
    """Stat `scheduling/retry_after`: the largest Retry-After (seconds) of any 429 or 503 response in the crawl."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> RetryAfterStats:
        extension = cls(crawler.stats)
        crawler.signals.connect(extension.response_received, signal=signals.response_received)
        return extension

    def response_received(self, response: Response, request: Request, spider: Any) -> None:
        if response.status not in RETRY_AFTER_STATUSES:
            return
        seconds = retry_after_seconds(response.headers.get(b"Retry-After"), now=time.time())
        if seconds:
            self.stats.max_value(RETRY_AFTER_STAT, round(seconds))
