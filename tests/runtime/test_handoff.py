"""Items reach Trawl through its last item pipeline (runtime.bridge.handoff); a frontier shard rebuilds only the
requests it did not keep. Each crawl runs in a subprocess of its own: the reactor is process-wide."""

from __future__ import annotations

import os
import subprocess

from tests.workers import last_json_line, script_run

DROPPING_CRAWL = """
import json, os, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from scrapy.exceptions import DropItem
from crawls.services.shards import job_frontier
from runtime.frontier import scheduler
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick

class DropProducts:
    # A spider's own pipeline: what it drops must never be stored or written ahead.
    def process_item(self, item):
        if "/product-" in item["url"]:
            raise DropItem("not wanted")
        return item

class ShopSpider(LinkSpider):
    # A spider's own pipelines replace the whole ITEM_PIPELINES setting: Trawl's handoff must survive that.
    custom_settings = {"ITEM_PIPELINES": {"__main__.DropProducts": 300}}

sys.modules["__main__"].DropProducts = DropProducts
scheduler.REQUESTS_KEPT_MAX = 2  # most requests are rebuilt from Redis, as in a shard that did not queue them

url, job = sys.argv[1], uuid.uuid4().hex
frontier, stored = job_frontier(job), []
crawl, session = run_spider(
    spider_cls=ShopSpider,
    settings=frontier_crawl_settings(job),
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 50}, "config": {}},
    timeout=120,
    on_tick=storing_tick(frontier, into=stored),
    tick_seconds=0.2,
)
stored.extend(session.drain(10_000))
stats = crawl.stats
print(json.dumps({
    "reason": crawl.finish_reason,
    "stored": [item["url"] for item in stored],
    "scraped": stats.get("item_scraped_count", 0),
    "dropped": stats.get("item_dropped_count", 0),
    "responses": stats.get("downloader/response_count", 0),
}))
frontier.delete()
"""

WITHOUT_HANDOFF = """
import os, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from scrapy.crawler import CrawlerProcess
from crawls.services.shards import job_frontier
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings

url, job = sys.argv[1], uuid.uuid4().hex
process = CrawlerProcess(frontier_crawl_settings(job))
crawler = process.create_crawler(LinkSpider)
process.crawl(crawler, url=url, start_urls=[url], options={}, config={})
process.start()
print("responses", crawler.stats.get_value("downloader/response_count", 0))
job_frontier(job).delete()
"""


def run_script(script: str, url: str, redis_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "REDIS_URL": redis_url, "TRAWL_INSTALLATION_ID": "handoff-test"}
    return script_run(script, url, env=env, timeout=180)


def test_items_dropped_by_a_spider_s_pipeline_are_never_stored_and_each_page_is_fetched_once(site, redis_server):
    done = run_script(DROPPING_CRAWL, f"{site.url}/index.html", redis_server)

    assert done.returncode == 0, done.stderr
    result = last_json_line(done)
    stored = result["stored"]
    assert result["reason"] == "finished"
    assert stored and result["dropped"] > 0
    assert not [url for url in stored if "/product-" in url]
    assert len(stored) == result["scraped"], result
    # One response per page (and an item for each, stored or dropped): requests rebuilt from Redis are the same.
    assert len(set(stored)) == len(stored)
    assert result["responses"] == len(stored) + result["dropped"] == 16


def test_a_frontier_crawl_without_the_handoff_refuses_to_start(site, redis_server):
    done = run_script(WITHOUT_HANDOFF, f"{site.url}/index.html", redis_server)

    assert "FrontierScheduler needs runtime.bridge.handoff.ItemHandoff in ITEM_PIPELINES" in done.stderr
    assert "responses 0" in done.stdout


def test_the_handoff_joins_the_base_pipelines_given_as_a_dict_or_as_json_and_leaves_the_version_s_alone():
    from runtime.bridge.handoff import HANDOFF, HANDOFF_ORDER, with_item_handoff

    for declared in ({"shop.pipelines.Base": 100, HANDOFF: 1}, '{"shop.pipelines.Base": 100}'):
        merged = with_item_handoff({"ITEM_PIPELINES_BASE": declared, "ITEM_PIPELINES": {"shop.pipelines.Clean": 300}})
        assert merged["ITEM_PIPELINES_BASE"] == {"shop.pipelines.Base": 100, HANDOFF: HANDOFF_ORDER}
        assert merged["ITEM_PIPELINES"] == {"shop.pipelines.Clean": 300}
    assert with_item_handoff({})["ITEM_PIPELINES_BASE"] == {HANDOFF: HANDOFF_ORDER}


def test_an_item_reaches_trawl_as_a_new_plain_dict_whatever_its_kind():
    from dataclasses import dataclass

    import scrapy

    from runtime.bridge.handoff import as_plain_dict

    class Product(scrapy.Item):
        name = scrapy.Field()

    @dataclass
    class Offer:
        price: str

    flat = {"url": "u", "n": 1, "ok": True, "none": None, "x": 1.5}
    copied = as_plain_dict(flat)
    assert copied == flat and copied is not flat
    nested = {"url": "u", "product": Product(name="mug"), "offers": [Offer(price="2")], "attrs": {"a": Offer("3")}}
    assert as_plain_dict(nested) == {
        "url": "u",
        "product": {"name": "mug"},
        "offers": [{"price": "2"}],
        "attrs": {"a": {"price": "3"}},
    }
    assert as_plain_dict(Product(name="mug")) == {"name": "mug"}
