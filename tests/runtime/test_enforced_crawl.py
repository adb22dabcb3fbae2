"""Trawl's pins in a real crawl (runtime/settings/enforced.py through run_spider): what a spider's from_crawler changes
is undone before the components are built, and what an add-on forces above every priority stops the crawl, named.

Run in a subprocess of its own: the reactor is process-wide and the test process must not own one.
"""

from __future__ import annotations

import pytest

from tests.workers import last_json_line, script_run

SCRIPT = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider
from runtime.spiders.selectors import SelectorsSpider
from tests.fixtures import hostile

url, marker = sys.argv[1], sys.argv[2]
report = {}
selected = {"item_links": "a", "fields": {"title": "title::text"}}
runs = {
    "LateStrippingSpider": (hostile.LateStrippingSpider, {}, {}),
    "TamperingAddonSpider": (hostile.TamperingAddonSpider, {}, {}),
    # What a version's settings would compose (they reach the crawl as its settings, not as custom_settings).
    "version_stats_class": (LinkSpider, {"STATS_CLASS": "scrapy.statscollectors.DummyStatsCollector"}, {}),
    "admin_opted_in_data": (SelectorsSpider, {"TRAWL_ALLOWED_SCHEMES": ["data"]}, selected),
    "not_opted_in": (SelectorsSpider, {}, selected),
}
for name, (spider_cls, extra, config) in runs.items():
    items = []

    def tick(session):
        items.extend(session.drain(100))
        return ""

    crawl, session = run_spider(
        spider_cls=spider_cls,
        settings={"LOG_LEVEL": "ERROR", "ROBOTSTXT_OBEY": False, **extra},
        spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 1}, "config": config},
        timeout=60,
        on_tick=tick,
        tick_seconds=0.2,
    )
    items.extend(session.drain(1000))
    report[name] = {
        "crawl_error": crawl.crawl_error,
        "refused_scheme": crawl.stats.get("schemes/refused", 0),
        "pages": crawl.stats.get("response_received_count", 0),
        "items": len(items),
        "leaked": any(marker in json.dumps(item) for item in items),
        "titles": sorted(str(item.get("title")) for item in items),
    }
print(json.dumps(report))
"""


@pytest.fixture
def page_linking_to_a_local_file(site, tmp_path):
    marker = "TRAWL-LOCAL-SECRET-4c1d"
    secret = tmp_path / "secret.html"
    secret.write_text(f"<html><title>{marker}</title></html>")
    page = site.root / "local-file-links.html"
    links = f'<a href="file://127.0.0.1{secret}">a</a><a href="data:text/html,<title>inline-data</title>">b</a>'
    page.write_text(f"<html><title>Links</title>{links}</html>")
    yield f"{site.url}/local-file-links.html", marker
    page.unlink()


def test_a_spider_that_rewrites_its_settings_late_still_crawls_under_trawls_pins(page_linking_to_a_local_file):
    url, marker = page_linking_to_a_local_file
    report = last_json_line(script_run(SCRIPT, url, marker))

    late = report["LateStrippingSpider"]
    assert late["crawl_error"] == ""
    assert late["pages"] == 1 and late["items"] == 1  # the item handoff it disabled still hands items to Trawl
    assert late["refused_scheme"] == 1  # its stats class (DummyStatsCollector) was undone, its file handler too
    assert not late["leaked"]

    addon = report["TamperingAddonSpider"]
    assert "EnforcedSettingChanged" in addon["crawl_error"]
    assert "DOWNLOADER_MIDDLEWARES" in addon["crawl_error"]
    assert addon["pages"] == 0 and addon["items"] == 0

    # A stats collector that keeps nothing would hide what Trawl counts (refusals, throttle, blocks): refused too.
    assert "EnforcedSettingChanged: STATS_CLASS" in report["version_stats_class"]["crawl_error"]

    # An admin's TRAWL_ALLOWED_SCHEMES (in the scraper's or version's settings) lets that scheme through, and only it.
    opted = report["admin_opted_in_data"]
    assert opted["titles"] == ["inline-data"] and opted["refused_scheme"] == 1  # data: fetched; file: still refused
    assert not opted["leaked"]
    assert report["not_opted_in"]["titles"] == [] and report["not_opted_in"]["refused_scheme"] == 2
