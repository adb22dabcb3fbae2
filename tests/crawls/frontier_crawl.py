"""Crawls without the job machinery, for tests that run them in a process of their own: a link crawl of a test site,
and a crawl on a job's frontier (its Scrapy settings and a tick storing its items)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crawls.frontier import Frontier
from crawls.services.shards import frontier_settings


def link_crawl(url: str, *, on_tick: Callable[[Any], str], tick_seconds: float) -> Any:
    """`run_spider` on the `link` spider from `url`, one request at a time, following links 50 deep: the result."""
    from crawls.scraping.runner import run_spider
    from crawls.scraping.spiders.link import LinkSpider

    crawl, _ = run_spider(
        spider_cls=LinkSpider,
        settings={"CONCURRENT_REQUESTS": 1, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR"},
        spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 50}, "config": {}},
        timeout=60,
        on_tick=on_tick,
        tick_seconds=tick_seconds,
    )
    return crawl


def frontier_crawl_settings(job: str) -> dict[str, Any]:
    return {"TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR", **frontier_settings(job_id=job, attempt=1, shard=0)}


def storing_tick(frontier: Frontier, into: list | None = None) -> Callable[[Any], str]:
    """What ItemIngest does every tick (crawls.services.ingestion): store the drained items (here: into `into`, or
    nowhere), then tell the frontier."""

    def tick(session: Any) -> str:
        if batch := session.drain(100):
            if into is not None:
                into.extend(batch)
            frontier.stored(len(batch))
        return ""

    return tick
