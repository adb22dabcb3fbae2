"""Counting the exceptions item pipelines raise. Scrapy logs them (`Error processing {item}`) but counts only a
callback's (`spider_exceptions/*`): this adds `item_errors/count` and `item_errors/<ExceptionType>`, which count
with the callbacks' towards TRAWL_MAX_SPIDER_ERRORS (runtime.bridge.outcome)."""

from __future__ import annotations

from typing import Any

from scrapy import signals

ITEM_ERRORS_PREFIX = "item_errors/"


class ItemErrorStats:
    def __init__(self, stats: Any) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> ItemErrorStats:
        extension = cls(crawler.stats)
        crawler.signals.connect(extension.item_error, signal=signals.item_error)
        return extension

    def item_error(self, item: Any, response: Any, spider: Any, failure: Any) -> None:
        self.stats.inc_value(f"{ITEM_ERRORS_PREFIX}count")
        self.stats.inc_value(f"{ITEM_ERRORS_PREFIX}{failure.type.__name__}")
