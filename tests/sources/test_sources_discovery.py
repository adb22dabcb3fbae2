"""Sources: discovery (a hub's links become sources), and what a crawl adds to its job's stats."""

from __future__ import annotations

import pytest
import scrapy
from django.utils import timezone
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawls.models import CrawlJob
from crawls.services.ingestion import ItemIngest
from registry.models import Scraper
from runtime.spiders.discovery import discovered
from runtime.watch.retry_after import RETRY_AFTER_STAT, RetryAfterStats
from sources.models import Source
from sources.services.children import source_crawl_extras, sources_discover
from sources.services.sources import source_create
from tests.sources.sources_helpers import free_lease

__all__ = ["free_lease"]  # an autouse fixture


@pytest.fixture
def hub(builtins):
    Scraper.objects.create(name="demo")
    config = {"cookies": {"lang": "en"}}
    url = "http://shop.test/index.html"
    return source_create(url=url, scraper="demo", kind="hub", strategy="discovery", config=config)


def hub_job(hub) -> CrawlJob:
    return CrawlJob.objects.create(url=hub.url, scraper=hub.scraper, source=hub)


def test_a_hub_creates_list_sources_that_inherit_its_scraper_and_config(hub):
    records = [discovered(f"http://shop.test/category/{name}/page-1.html#top") for name in ("kitchen", "garden")]

    created = sources_discover(job=hub_job(hub), records=records)

    children = Source.objects.filter(parent=hub).order_by("url")
    assert created == 2
    assert [child.url for child in children] == [
        "http://shop.test/category/garden/page-1.html",
        "http://shop.test/category/kitchen/page-1.html",
    ]
    assert {(c.kind, c.strategy, c.scraper.name, c.priority) for c in children} == {("list", "deep", "demo", 50)}
    assert all(child.config == {"cookies": {"lang": "en"}} for child in children)
    assert all(child.next_sync_at <= timezone.now() for child in children), "new sources are due at once"


def test_discovery_is_deduplicated_across_runs_and_stays_on_the_site(hub):
    records = [discovered("http://shop.test/a"), discovered("http://shop.test/a"), discovered("http://evil.test/x")]

    first = sources_discover(job=hub_job(hub), records=records)
    second = sources_discover(job=hub_job(hub), records=[*records, discovered("http://shop.test/b")])

    assert (first, second) == (1, 1)
    assert sorted(Source.objects.filter(parent=hub).values_list("url", flat=True)) == [
        "http://shop.test/a",
        "http://shop.test/b",
    ]


def test_children_spec_picks_their_scraper_config_and_kind(hub):
    hub.config = {"children": {"scraper": "selectors", "config": {"fields": {"t": "h1"}}, "kind": "product"}}
    hub.save()
    records = [discovered("http://shop.test/p/1"), discovered("http://shop.test/h", kind="hub")]

    sources_discover(job=hub_job(hub), records=records)

    children = {c.url: c for c in Source.objects.filter(parent=hub).select_related("scraper")}
    product, sub_hub = children["http://shop.test/p/1"], children["http://shop.test/h"]
    assert (product.kind, product.scraper.name, product.config) == ("product", "selectors", {"fields": {"t": "h1"}})
    assert (sub_hub.kind, sub_hub.strategy) == ("hub", "discovery"), "a hub a hub finds goes on discovering"


def test_a_deep_source_never_creates_sources(hub):
    hub.strategy = "deep"
    hub.save()

    assert sources_discover(job=hub_job(hub), records=[discovered("http://shop.test/a")]) == 0
    assert not Source.objects.filter(parent=hub).exists()


class FakeSession:
    def __init__(self, batch):
        self.batch = list(batch)

    def drain(self, limit):
        out, self.batch = self.batch[:limit], self.batch[limit:]
        return out


def test_the_job_tracker_keeps_discovered_links_apart_from_items(hub):
    tracker = ItemIngest(hub_job(hub))
    session = FakeSession([{"url": "http://shop.test/p/1", "title": "One"}, discovered("http://shop.test/c/1")])

    tracker.flush(session)

    assert tracker.item_counts()["items"] == 1
    assert list(tracker.discovered) == ["http://shop.test/c/1"]


# --- What a crawl adds to its job's stats --------------------------------------------------------


def test_the_longest_retry_after_of_a_crawl_is_recorded_and_reaches_the_job_stats(hub):
    crawler = get_crawler(scrapy.Spider)
    extension = RetryAfterStats.from_crawler(crawler)
    spider = scrapy.Spider(name="probe")
    for status, header in ((429, "120"), (503, "30"), (200, "99999"), (429, "soon")):
        extension.response_received(
            Response("http://shop.test/", status=status, headers={"Retry-After": header}), None, spider
        )
    scrapy_stats = crawler.stats.get_stats()

    extras = source_crawl_extras(
        job=hub_job(hub), discovered=[discovered("http://shop.test/c/1")], scrapy_stats=scrapy_stats
    )

    assert scrapy_stats[RETRY_AFTER_STAT] == 120
    assert extras == {"retry_after": 120, "discovered": 1, "sources_created": 1}
