"""Trawl's pins against the spider: custom_settings, from_crawler and add-ons cannot remove, reorder or disable Trawl's
components or its enforced settings (runtime/settings/enforced.py). End to end: tests/security/test_custom_settings.py.
"""

from __future__ import annotations

import copy

import pytest
from scrapy.settings import default_settings
from scrapy.utils.conf import build_component_list

from access.services import token_issue
from crawls.models import CrawlJob
from crawls.services.crawl_spec import crawl_spec_build
from crawls.services.shards import frontier_settings
from registry.models import Scraper, ScraperVersion
from runtime.guard.schemes import HTTP_DOWNLOAD_HANDLERS
from runtime.items.bounds import ITEM_BOUNDS
from runtime.settings.compose import scrapy_settings_for
from runtime.settings.enforced import (
    ENFORCED_PRIORITY,
    HANDED_SPIDER_LOADER,
    HandedSpiderLoader,
    TrawlCrawler,
    crawler_create,
    pins_apply,
    pins_broken,
)
from runtime.watch.budget import ITEM_BUDGET
from tests.fixtures.hostile import BLOCKS, GATE, GUARD, STRIPPING_SETTINGS, THROTTLE, SettingsStrippingSpider

pytestmark = pytest.mark.django_db

HANDOFF = "runtime.bridge.handoff.ItemHandoff"
OWN_MIDDLEWARE = "myproject.middlewares.OwnMiddleware"


@pytest.fixture
def composed(settings):
    """What the runner hands Scrapy for a guarded requester's job (production settings) on one shard."""
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
    requester, _ = token_issue(requester_name="mallory")
    scraper = Scraper.objects.create(name="hostile")
    version = ScraperVersion.objects.create(scraper=scraper, version="1.0.0", spider="tests.fixtures.hostile.X")
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper, requester=requester)
    merged = scrapy_settings_for(spec=crawl_spec_build(job=job, version=version))
    merged.update(frontier_settings(job_id=str(job.pk), attempt=1, shard=0))
    return merged


def crawler_for(spider_cls, composed) -> TrawlCrawler:
    _, crawler = crawler_create(spider_cls, composed)  # as every crawl is built
    return crawler


def enabled(settings, name: str) -> list[str]:
    return build_component_list(settings.getwithbase(name))


def test_a_spiders_custom_settings_keep_every_trawl_component_in_its_place(composed):
    crawler = crawler_for(SettingsStrippingSpider, composed)
    settings = crawler.settings

    middlewares = enabled(settings, "DOWNLOADER_MIDDLEWARES")
    assert middlewares[0] == GATE  # the very first: nothing sees a file:// request before it is refused
    assert middlewares.index(GUARD) < middlewares.index(THROTTLE) < middlewares.index(BLOCKS)
    assert settings.getwithbase("DOWNLOADER_MIDDLEWARES")[THROTTLE] == 800
    assert set(enabled(settings, "EXTENSIONS")) >= {
        "runtime.watch.watchdogs.StallWatchdog",
        "runtime.watch.watchdogs.ErrorRateWatchdog",
        "runtime.watch.watchdogs.FieldCoverage",
        "runtime.watch.retry_after.RetryAfterStats",
    }
    assert HANDOFF in enabled(settings, "ITEM_PIPELINES")
    assert pins_broken(settings, crawler.pins) == ""


def test_a_spider_gets_no_other_scheme_no_telnet_no_trawl_knob_of_its_own(composed):
    settings = crawler_for(SettingsStrippingSpider, composed).settings

    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    assert {scheme: path for scheme, path in handlers.items() if path} == HTTP_DOWNLOAD_HANDLERS
    assert settings.getlist("TRAWL_ALLOWED_SCHEMES") == ["http", "https"]
    assert settings.getbool("TELNETCONSOLE_ENABLED") is False
    assert "scrapy.extensions.remote_control.RemoteControl" not in settings.getwithbase("EXTENSIONS")  # never loaded
    assert settings.getbool("AUTOTHROTTLE_ENABLED") is False
    assert settings.getbool("TRAWL_GUARD_PRIVATE_TARGETS") is True
    assert settings.getlist("TRAWL_PRIVATE_TARGETS_ALLOWED") == composed["TRAWL_PRIVATE_TARGETS_ALLOWED"]
    assert settings["TRAWL_STALL_SECONDS"] == composed["TRAWL_STALL_SECONDS"]  # the project's, not the spider's 0
    assert settings["SCHEDULER"] == "runtime.frontier.scheduler.FrontierScheduler"
    assert settings["STATS_CLASS"] == "runtime.bridge.stats.CrawlStats"
    assert settings.getdict("FEEDS") == {}  # admins set FEEDS; a spider writes no file on the worker


def test_a_spiders_own_components_still_join_trawls(composed):
    class OwnSpider(SettingsStrippingSpider):
        custom_settings = {
            "DOWNLOADER_MIDDLEWARES": {OWN_MIDDLEWARE: 543},
            "ITEM_PIPELINES": {"myproject.pipelines.OwnPipeline": 300},
            "DOWNLOAD_DELAY": 0.25,
        }

    settings = crawler_for(OwnSpider, composed).settings

    assert settings.getwithbase("DOWNLOADER_MIDDLEWARES")[OWN_MIDDLEWARE] == 543
    assert enabled(settings, "ITEM_PIPELINES") == ["myproject.pipelines.OwnPipeline", ITEM_BOUNDS, ITEM_BUDGET, HANDOFF]
    assert settings.getfloat("DOWNLOAD_DELAY") == 0.25  # what is not Trawl's stays the spider's


def test_whatever_outranks_trawl_after_the_pins_is_named(composed):
    crawler = crawler_for(SettingsStrippingSpider, composed)
    settings = crawler.settings
    settings.set("DOWNLOADER_MIDDLEWARES", {GUARD: None}, priority=ENFORCED_PRIORITY + 1)
    assert pins_broken(settings, crawler.pins) == "DOWNLOADER_MIDDLEWARES"

    crawler = crawler_for(SettingsStrippingSpider, composed)
    crawler.settings.set("DOWNLOAD_HANDLERS_BASE", {"file": "x.File"}, priority=ENFORCED_PRIORITY + 1)
    assert pins_broken(crawler.settings, crawler.pins) == "DOWNLOAD_HANDLERS"

    crawler = crawler_for(SettingsStrippingSpider, composed)
    crawler.settings.set("TELNETCONSOLE_ENABLED", True, priority=ENFORCED_PRIORITY + 1)
    assert pins_broken(crawler.settings, crawler.pins) == "TELNETCONSOLE_ENABLED"

    crawler = crawler_for(SettingsStrippingSpider, composed)
    crawler.settings.set("TRAWL_NEW_KNOB", 1, priority=ENFORCED_PRIORITY + 1)
    assert pins_broken(crawler.settings, crawler.pins) == "TRAWL_NEW_KNOB"


def test_pins_applied_again_undo_what_the_spider_did_after_custom_settings(composed):
    """What Crawler._apply_settings does (TrawlCrawler re-applies the pins there): a spider's from_crawler that
    rewrote the settings at the highest priority Scrapy names is undone."""
    crawler = crawler_for(SettingsStrippingSpider, composed)
    # Trawl's own values hold at a priority above 'cmdline'; a TRAWL_* knob of the spider's own does not.
    crawler.settings.setdict({**STRIPPING_SETTINGS, "TRAWL_SPIDERS_OWN": 1}, priority="cmdline")
    assert pins_broken(crawler.settings, crawler.pins) == "TRAWL_SPIDERS_OWN"

    pins_apply(crawler.settings, crawler.pins)

    assert pins_broken(crawler.settings, crawler.pins) == ""


def test_a_crawls_settings_are_its_own_without_scrapys_second_deep_copy(composed):
    """The crawler takes the settings its runner composed for it (Scrapy would deep-copy them again): every value
    among them is still its own, so a crawl that changes one in place changes no other crawl of its process, nor the
    composed dict, nor Scrapy's defaults."""
    composed = {**composed, "MY_LIST": [1], "MY_NESTED": {"inner": [1]}, "MY_TUPLE": ([1],)}
    before = copy.deepcopy(composed)
    runner, crawler = crawler_create(SettingsStrippingSpider, composed)
    assert crawler.settings is runner.settings
    crawler.settings["RETRY_HTTP_CODES"].append(299)
    crawler.settings["MY_LIST"].append(2)
    crawler.settings["MY_NESTED"]["inner"].append(2)
    crawler.settings["MY_TUPLE"][0].append(2)

    _, another = crawler_create(SettingsStrippingSpider, composed)
    assert 299 not in another.settings["RETRY_HTTP_CODES"] and 299 not in default_settings.RETRY_HTTP_CODES
    assert composed == before
    assert (another.settings["MY_LIST"], another.settings["MY_NESTED"]["inner"], another.settings["MY_TUPLE"]) == (
        [1],
        [1],
        ([1],),
    )
    with pytest.raises(RuntimeError, match="one crawler"):
        runner.create_crawler(SettingsStrippingSpider)


def test_a_crawls_runner_makes_no_further_copy_of_its_settings(composed, monkeypatch):
    """Scrapy's runner deep-copies its settings for a spider loader and merges them into the crawler it runs: Trawl's
    runner, handed its spider class and running the crawler that holds its very settings, does neither, and still has
    whatever Scrapy's own runner sets up."""
    from scrapy.crawler import CrawlerRunner
    from scrapy.settings import BaseSettings, Settings

    copies = []
    original = BaseSettings.copy

    def copy_counted(self):
        if "BOT_NAME" in self.attributes:  # a whole crawl's settings, not one of its dict settings
            copies.append(self)
        return original(self)

    monkeypatch.setattr(BaseSettings, "copy", copy_counted)
    runner, crawler = crawler_create(SettingsStrippingSpider, composed)
    assert runner.create_crawler(crawler) is crawler
    assert copies == []

    monkeypatch.setattr(BaseSettings, "copy", original)
    assert set(vars(CrawlerRunner(Settings()))) <= set(vars(runner)), "all that Scrapy's own runner sets up"
    assert isinstance(runner.spider_loader, HandedSpiderLoader)
    with pytest.raises(KeyError, match="handed its spider class"):
        runner.spider_loader.load("any")
    assert crawler.settings["SPIDER_LOADER_CLASS"] == HANDED_SPIDER_LOADER
    whole = crawler.settings.frozencopy()  # once the runner is built, a frozen copy is a whole one again
    assert whole["BOT_NAME"] == crawler.settings["BOT_NAME"] and whole.frozen
