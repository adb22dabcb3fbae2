"""Monitors and feeds are set by admins on scrapers, versions and sources, checked on the way in; never by jobs."""

from __future__ import annotations

import pytest

from crawls.models import CrawlJob
from crawls.services.crawl_spec import crawl_spec_build
from registry.models import ScraperVersion
from runtime.settings.compose import scrapy_settings_for
from tests.clients import client_for

pytestmark = pytest.mark.django_db
BAD = {"TRAWL_MONITORS": {"min_itemz": 5}}


def test_bad_monitors_on_a_scraper_or_version_are_refused_naming_settings(builtins):
    admin = client_for("ops", admin=True)

    scraper = admin.post("/api/scrapers/", {"name": "shop", "settings": BAD}, format="json")
    version = admin.post(
        "/api/scrapers/link/versions/",
        {"version": "9.0.0", "variant": "canary", "spider": "runtime.spiders.link.LinkSpider", "settings": BAD},
        format="json",
    )

    assert scraper.status_code == version.status_code == 400
    assert "unknown monitor 'min_itemz'" in scraper.json()["settings"][0]
    assert "settings" in version.json()
    good = admin.post(
        "/api/scrapers/", {"name": "shop", "settings": {"TRAWL_MONITORS": {"min_items": 5}}}, format="json"
    )
    assert good.status_code == 201, good.content


def test_bad_monitors_on_a_source_are_refused_naming_config(builtins):
    admin = client_for("ops", admin=True)

    response = admin.post(
        "/api/sources/", {"url": "http://shop.test/", "scraper": "link", "config": BAD}, format="json"
    )

    assert response.status_code == 400
    assert "config" in response.json()


def test_job_options_cannot_reach_feeds(api, builtins):
    refused = api.post(
        "/api/jobs/", {"url": "http://shop.test/", "options": {"FEEDS": {"s3://x/y": {}}}}, format="json"
    )
    job = api.post(
        "/api/jobs/",
        {"url": "http://shop.test/", "options": {"config": {"FEEDS": {"file:///tmp/x": {}}}}},
        format="json",
    ).json()

    version = ScraperVersion.objects.get(scraper__name="link")
    merged = scrapy_settings_for(spec=crawl_spec_build(job=CrawlJob.objects.get(pk=job["id"]), version=version))

    assert refused.status_code == 400
    assert "FEEDS" not in merged
    assert merged["TRAWL_FEED_PARAMS"] == {"job_id": job["id"], "attempt": 1, "scraper": "link", "version": "1.0.0"}
