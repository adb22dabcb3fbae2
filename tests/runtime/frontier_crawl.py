"""Crawls without the job machinery, for tests that run them in a process of their own: a link crawl of a test site,
and a crawl on a job's frontier (its Scrapy settings and a tick storing its items)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crawls.services.shards import frontier_settings, job_frontier
from runtime.frontier import Frontier
from tests.crawler import composed


def link_crawl(url: str, *, on_tick: Callable[[Any], str], tick_seconds: float) -> Any:
    """`run_spider` on the `link` spider from `url`, one request at a time, following links 50 deep: the result."""
    from runtime.bridge.runner import run_spider
    from runtime.spiders.link import LinkSpider

    crawl, _ = run_spider(
        spider_cls=LinkSpider,
        settings=composed({"CONCURRENT_REQUESTS": 1, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR"}),
        spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 50}, "config": {}},
        timeout=60,
        on_tick=on_tick,
        tick_seconds=tick_seconds,
    )
    return crawl


def job_link_crawl(url: str) -> Any:
    """The `link` spider from `url`, one level deep, with a job's own Scrapy settings (`scrapy_settings_for`) on a
    frontier of its own, deleted after: what a pool process's crawl runs, without the job machinery. The result."""
    import uuid

    from crawls.models import CrawlJob
    from crawls.services.crawl_spec import crawl_spec_build
    from registry.models import Scraper, ScraperVersion
    from runtime.bridge.runner import run_spider
    from runtime.settings.compose import scrapy_settings_for
    from runtime.spiders.link import LinkSpider

    job_id = uuid.uuid4().hex
    version = ScraperVersion(scraper=Scraper(name="link", settings={}), settings={}, version="1")
    settings = scrapy_settings_for(spec=crawl_spec_build(job=CrawlJob(options={}), version=version))
    settings.update(frontier_settings(job_id=job_id, attempt=1, shard=0), LOG_LEVEL="ERROR")
    frontier = job_frontier(job_id)
    crawl, _ = run_spider(
        spider_cls=LinkSpider,
        settings=settings,
        spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 1}, "config": {}},
        timeout=60,
        on_tick=storing_tick(frontier),
        tick_seconds=0.2,
    )
    frontier.delete()
    return crawl


def frontier_crawl_settings(job: str) -> dict[str, Any]:
    return composed(
        {"TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR", **frontier_settings(job_id=job, attempt=1, shard=0)}
    )


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
