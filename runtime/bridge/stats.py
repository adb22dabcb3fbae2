"""The stats collector every crawl gets (STATS_CLASS in TRAWL_SCRAPY_SETTINGS)."""

from __future__ import annotations

from typing import Any

from scrapy.statscollectors import MemoryStatsCollector


class CrawlStats(MemoryStatsCollector):
    """Scrapy's in-memory collector without its check for the deprecated `spider` argument.

    Since Scrapy 2.13 every attribute read on a collector goes through a Python-level `__getattribute__` (which, for
    anything but a stats method, raises and catches an AttributeError: `self._stats` inside `inc_value` too), and
    every stats call through a wrapper that looks for `spider`. A crawl makes tens of stats calls per page: ~1.5 % of
    a CPU-bound crawl's reactor time (bench/README.md). The methods still accept `spider`, without the warning.
    """

    __getattribute__ = object.__getattribute__


def crawl_stat(session: Any, name: str) -> Any:
    """One stat of a running crawl (a runtime.bridge.runner.CrawlSession), read from its task thread: one dict lookup,
    atomic, where `live_stats` copies every stat inside the reactor thread."""
    if session.crawler is None:  # a crawl in a child process: the stats it sent
        return session.reported_stats.get(name)
    stats = session.crawler._stats  # unset while a spider that refused to start is being reported
    return stats.get_value(name) if stats else None
