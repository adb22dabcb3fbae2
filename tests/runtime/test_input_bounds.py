"""Bounds on what a requester asks for (runtime/inputs/checks.py InputBounds): `attrs` (copied into every item) and a
sitemap's `max_urls`, refused naming the field by every way in to a job or source (service, batch, API, CLI)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from crawls.models import CrawlJob
from crawls.services import job_create
from crawls.services.batches import batch_create
from project.errors import TrawlError
from sources.models import Source
from sources.services.sources import source_create


@pytest.fixture(autouse=True)
def small_bounds(settings):
    settings.TRAWL_ATTRS_MAX_BYTES = 100
    settings.TRAWL_SITEMAP_MAX_URLS = 1000


BIG_ATTRS = {"note": "é" * 60}  # 120 bytes of UTF-8: over 100 although 60 characters


def test_job_create_refuses_big_attrs_and_max_urls_naming_them(builtins):
    with pytest.raises(TrawlError) as attrs:
        job_create(url="http://shop.test/", options={"attrs": BIG_ATTRS})
    with pytest.raises(TrawlError) as urls:
        job_create(url="http://shop.test/s.xml", scraper="sitemap", options={"config": {"max_urls": 1001}})

    assert attrs.value.field == "options" and attrs.value.message.startswith("attrs: ")
    assert urls.value.field == "options" and urls.value.message.startswith("config.max_urls: ")
    assert not CrawlJob.objects.exists()
    job_create(url="http://shop.test/", options={"attrs": {"note": "x" * 80}, "config": {"max_urls": 1000}})


def test_a_batch_with_one_big_attrs_creates_nothing(builtins):
    with pytest.raises(TrawlError) as refused:
        batch_create(jobs=[{"url": "http://shop.test/"}, {"url": "http://shop.test/", "options": {"attrs": BIG_ATTRS}}])

    assert "attrs" in refused.value.as_dict()["jobs"]["1"]["options"][0]
    assert not CrawlJob.objects.exists()


def test_the_api_names_attrs_and_max_urls(api, builtins):
    attrs = api.post("/api/jobs/", {"url": "http://shop.test/", "options": {"attrs": BIG_ATTRS}}, format="json")
    options = {"config": {"max_urls": 5000}}
    urls = api.post("/api/jobs/", {"url": "http://shop.test/s.xml", "scraper": "sitemap", "options": options}, "json")

    assert attrs.status_code == urls.status_code == 400
    assert "at most 100 bytes" in attrs.json()["options"]["attrs"][0]
    assert "from 1 to 1000" in urls.json()["options"]["config"]["max_urls"][0]


def test_the_crawl_command_names_attrs(builtins):
    with pytest.raises(CommandError, match=r"options\.attrs: "):
        call_command("crawl", "http://shop.test/", "--options", '{"attrs": {"note": "' + "x" * 200 + '"}}')

    assert not CrawlJob.objects.exists()


def test_a_sitemap_source_over_the_cap_is_refused_naming_config(builtins):
    with pytest.raises(TrawlError) as refused:
        source_create(url="http://shop.test/sitemap.xml", kind="sitemap", config={"max_urls": 10**9})

    assert refused.value.field == "config" and "max_urls" in refused.value.message
    assert not Source.objects.exists()
