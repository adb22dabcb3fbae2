"""Every crawl counts its stats with CrawlStats: Scrapy's collector without the per-call deprecation check."""

from __future__ import annotations

import inspect
import warnings

import pytest
from scrapy.crawler import Crawler
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from crawls.models import CrawlJob
from crawls.services.crawl_spec import crawl_spec_build
from registry.models import Scraper, ScraperVersion
from runtime.bridge.stats import CrawlStats
from runtime.settings.compose import scrapy_settings_for
from runtime.spiders.link import LinkSpider


def crawler_with(version_settings: dict) -> Crawler:
    version = ScraperVersion(scraper=Scraper(name="link", settings={}), settings=version_settings, version="1")
    return get_crawler(
        LinkSpider, scrapy_settings_for(spec=crawl_spec_build(job=CrawlJob(options={}), version=version))
    )


def test_a_crawl_counts_with_crawl_stats_and_a_version_may_bring_its_own():
    assert type(crawler_with({}).stats) is CrawlStats
    assert type(crawler_with({"STATS_CLASS": "scrapy.statscollectors.MemoryStatsCollector"}).stats) is (
        MemoryStatsCollector
    )


def test_crawl_stats_counts_as_scrapy_does_and_still_takes_the_spider_argument():
    stats = crawler_with({}).stats
    spider = LinkSpider(url="http://example.com/")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning either
        stats.inc_value("pages")
        stats.inc_value("pages", 2, spider=spider)
        stats.max_value("depth", 3)
        stats.max_value("depth", 1, spider)
        stats.set_value("reason", "finished")
    assert stats.get_stats() == {"pages": 3, "depth": 3, "reason": "finished"}


@pytest.mark.parametrize("method", ["inc_value", "set_value", "get_value"])
def test_crawl_stats_calls_reach_the_method_without_a_wrapper(method):
    """What makes it cheaper. If Scrapy's own collector stops handing out a wrapper that inspects every call's
    arguments, CrawlStats has no reason left to exist."""
    assert getattr(crawler_with({}).stats, method).__func__ is getattr(MemoryStatsCollector, method)
    assert not inspect.ismethod(getattr(MemoryStatsCollector(crawler_with({})), method))
