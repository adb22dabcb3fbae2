"""A job's `max_pages` / `max_items`: validated, composed onto CLOSESPIDER_*, made exact (runtime.watch.budget)."""

from __future__ import annotations

import uuid

import pytest
from scrapy import Request
from scrapy.exceptions import DropItem, IgnoreRequest
from scrapy.http.request import NO_CALLBACK

from crawls.models import CrawlJob
from crawls.serializers.jobs import JobCreateSerializer
from crawls.services.crawl_spec import crawl_spec_build
from registry.models import Scraper, ScraperVersion
from runtime.frontier import frontier_delete
from runtime.settings.compose import scrapy_settings_for
from runtime.settings.enforced import ENFORCED
from runtime.watch.budget import BUDGET_CLOSESPIDER, ItemBudget, PageBudget, closed_by
from tests.crawler import trawl_crawler

SPIDER = "runtime.spiders.link.LinkSpider"


def composed_for(*, options, version_settings=None):
    owner = Scraper.objects.create(name="shop")
    used = ScraperVersion.objects.create(scraper=owner, version="1.0.0", spider=SPIDER, settings=version_settings or {})
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=owner, options=options)
    return scrapy_settings_for(spec=crawl_spec_build(job=job, version=used))


@pytest.mark.django_db
def test_job_options_become_closespider_settings():
    merged = composed_for(options={"max_pages": 5, "max_items": 7})

    assert (merged["CLOSESPIDER_PAGECOUNT"], merged["CLOSESPIDER_ITEMCOUNT"]) == (5, 7)
    assert "runtime.watch.budget.PageBudget" in merged["DOWNLOADER_MIDDLEWARES"]


@pytest.mark.django_db
def test_max_seconds_is_closespider_timeout():
    assert composed_for(options={"max_seconds": 60})["CLOSESPIDER_TIMEOUT"] == 60.0
    assert closed_by("closespider_timeout") == "max_seconds"


@pytest.mark.django_db
def test_a_versions_shorter_closespider_timeout_stays():
    shorter = composed_for(options={"max_seconds": 60}, version_settings={"CLOSESPIDER_TIMEOUT": "20.5"})
    assert shorter["CLOSESPIDER_TIMEOUT"] == 20.5


@pytest.mark.django_db
def test_a_versions_lower_bound_stays_and_a_job_cannot_raise_it():
    merged = composed_for(options={"max_pages": 50}, version_settings={"CLOSESPIDER_PAGECOUNT": 10})

    assert merged["CLOSESPIDER_PAGECOUNT"] == 10


@pytest.mark.django_db
def test_options_are_validated_and_bounded():
    def errors(options):
        serializer = JobCreateSerializer(data={"url": "http://shop.test/", "options": options})
        serializer.is_valid()
        return serializer.errors.get("options", {})

    assert errors({"max_pages": 5, "max_items": 3}) == {}
    assert "max_pages" in errors({"max_pages": 0})
    assert "max_items" in errors({"max_items": 10**12})
    assert "max_pages" in errors({"max_pages": "many"})
    assert errors({"max_seconds": 2.5}) == {}
    assert "max_seconds" in errors({"max_seconds": 0}) and "max_seconds" in errors({"max_seconds": 10**9})


@pytest.mark.django_db
def test_a_bounded_job_may_run_as_parallel_shards_which_share_its_budget():
    serializer = JobCreateSerializer(data={"url": "http://shop.test/", "parallelism": 2, "options": {"max_pages": 5}})

    assert serializer.is_valid(), serializer.errors


def test_page_budget_refuses_the_spiders_requests_past_it_but_not_robots_txt():
    crawler = trawl_crawler(settings_dict={"CLOSESPIDER_PAGECOUNT": 2})
    crawler.stats.open_spider()
    budget = PageBudget.from_crawler(crawler)

    budget.process_request(Request("http://shop.test/robots.txt", callback=NO_CALLBACK))
    budget.process_request(Request("http://shop.test/1"))
    budget.process_request(Request("http://shop.test/2"))
    with pytest.raises(IgnoreRequest):
        budget.process_request(Request("http://shop.test/3"))
    assert crawler.stats.get_value("budget/refused_pages") == 1


@pytest.mark.django_db  # the frontier's keys carry the installation id, read from the database
def test_on_a_jobs_frontier_the_budget_is_the_jobs_across_attempts_and_shards():
    frontier = {"job": f"budget-{uuid.uuid4().hex}", "attempt": 1, "shard": 0}
    first, later = (
        trawl_crawler(settings_dict={"CLOSESPIDER_PAGECOUNT": 3, "TRAWL_FRONTIER": {**frontier, **where}})
        for where in ({}, {"attempt": 2, "shard": 1})
    )
    try:
        budgets = [PageBudget.from_crawler(crawler) for crawler in (first, later)]
        for crawler in (first, later):
            crawler.stats.open_spider()
        budgets[0].process_request(Request("http://shop.test/1"))
        budgets[0].process_request(Request("http://shop.test/2"))
        budgets[1].process_request(Request("http://shop.test/3"))
        with pytest.raises(IgnoreRequest):
            budgets[1].process_request(Request("http://shop.test/4"))
    finally:
        frontier_delete(job_id=frontier["job"], ttl_seconds=1)
    assert later.stats.get_value("budget/refused_pages") == 1


@pytest.mark.django_db  # the frontier's keys carry the installation id, read from the database
def test_on_a_jobs_frontier_items_are_counted_for_the_job_too():
    frontier = {"job": f"budget-{uuid.uuid4().hex}", "attempt": 1, "shard": 0}
    first, later = (
        trawl_crawler(settings_dict={"CLOSESPIDER_ITEMCOUNT": 2, "TRAWL_FRONTIER": {**frontier, "attempt": attempt}})
        for attempt in (1, 2)
    )
    try:
        budgets = [ItemBudget.from_crawler(crawler) for crawler in (first, later)]
        for crawler in (first, later):
            crawler.stats.open_spider()
        budgets[0].process_item({"n": 1})
        budgets[1].process_item({"n": 2})
        with pytest.raises(DropItem):
            budgets[1].process_item({"n": 3})
    finally:
        frontier_delete(job_id=frontier["job"], ttl_seconds=1)
    assert later.stats.get_value("budget/dropped_items") == 1


def test_item_budget_drops_items_past_it():
    crawler = trawl_crawler(settings_dict={"CLOSESPIDER_ITEMCOUNT": 1})
    crawler.stats.open_spider()
    budget = ItemBudget.from_crawler(crawler)

    assert budget.process_item({"id": 1}) == {"id": 1}
    with pytest.raises(DropItem):
        budget.process_item({"id": 2})


def test_scrapys_closespider_is_replaced_by_the_one_that_counts_pages_only():
    assert BUDGET_CLOSESPIDER in ENFORCED["EXTENSIONS_BASE"]
    assert "scrapy.extensions.closespider.CloseSpider" not in ENFORCED["EXTENSIONS_BASE"]


def test_closed_by_names_the_option():
    assert (closed_by("closespider_pagecount"), closed_by("closespider_itemcount"), closed_by("finished")) == (
        "max_pages",
        "max_items",
        "",
    )


@pytest.mark.django_db
def test_a_sources_config_bounds_its_jobs_and_is_checked(admin_api, builtins):
    from sources.models import Source

    created = admin_api.post("/api/sources/", {"url": "http://shop.test/", "config": {"max_pages": 7}}, format="json")
    refused = admin_api.post("/api/sources/", {"url": "http://shop.test/2", "config": {"max_pages": 0}}, format="json")

    assert created.status_code == 201, created.content
    assert refused.status_code == 400 and "config" in refused.json()
    source = Source.objects.get(pk=created.json()["id"])
    job = CrawlJob.objects.create(url=source.url, scraper=source.scraper, source=source)
    merged = scrapy_settings_for(
        spec=crawl_spec_build(job=job, version=ScraperVersion.objects.get(scraper=source.scraper))
    )
    assert merged["CLOSESPIDER_PAGECOUNT"] == 7


@pytest.mark.django_db
def test_recording_is_asked_by_a_job_option_or_a_sources_config_and_the_job_wins(builtins):
    from sources.models import Source

    link = Scraper.objects.get(name="link")
    version = ScraperVersion.objects.get(scraper=link)
    source = Source.objects.create(url="http://shop.test/", scraper=link, config={"TRAWL_RECORD": True})

    def recorded(**fields) -> bool:
        job = CrawlJob.objects.create(url="http://shop.test/", scraper=link, **fields)
        return scrapy_settings_for(spec=crawl_spec_build(job=job, version=version))["TRAWL_RECORD"]

    assert (recorded(), recorded(options={"record": True}), recorded(source=source)) == (False, True, True)
    assert recorded(source=source, options={"record": False}) is False
