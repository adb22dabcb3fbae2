"""Incremental crawls, piece by piece: the policy, the stored form of a page, lastmod memory, the settings."""

from __future__ import annotations

import asyncio

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.settings import Settings

from crawls.services.crawl_spec import crawl_spec_build
from project.redis import get_redis, loop_redis_close
from runtime.incremental.cache import (
    SCOPE_SETTING,
    AlwaysRevalidatePolicy,
    IncrementalCacheMiddleware,
    incremental_on,
    response_dumps,
    response_loads,
)
from runtime.incremental.lastmod import LastmodMemory, lastmod_value
from runtime.settings.compose import scrapy_settings_for
from tests.crawler import trawl_crawler

URL = "http://shop.test/list-1.html"
VALIDATED = {"ETag": '"abc"', "Last-Modified": "Mon, 23 Nov 2026 09:00:00 GMT", "Content-Type": "text/html"}


@pytest.fixture(autouse=True)
def clean_keys():
    yield
    client = get_redis()
    for key in client.scan_iter("trawl:test-incremental:*"):
        client.delete(key)


def policy() -> AlwaysRevalidatePolicy:
    return AlwaysRevalidatePolicy(Settings())


def test_only_200s_with_a_validator_are_stored():
    request = Request(URL)
    assert policy().should_cache_response(HtmlResponse(URL, headers=VALIDATED, body=b"x"), request)
    assert not policy().should_cache_response(HtmlResponse(URL, body=b"x"), request)
    assert not policy().should_cache_response(HtmlResponse(URL, status=404, headers=VALIDATED, body=b"x"), request)


def test_a_stored_page_is_always_revalidated_with_its_validators():
    request = Request(URL)
    cached = HtmlResponse(URL, headers={**VALIDATED, "Cache-Control": "max-age=86400"}, body=b"x")

    assert policy().is_cached_response_fresh(cached, request) is False
    assert request.headers[b"If-None-Match"] == b'"abc"'
    assert request.headers[b"If-Modified-Since"] == VALIDATED["Last-Modified"].encode()


def test_only_a_304_keeps_the_stored_page():
    cached, request = HtmlResponse(URL, headers=VALIDATED, body=b"old"), Request(URL)
    assert policy().is_cached_response_valid(cached, Response(URL, status=304), request)
    assert not policy().is_cached_response_valid(cached, Response(URL, status=503), request)


def test_a_page_survives_its_stored_form():
    page = HtmlResponse(URL, headers=VALIDATED, body="<h1>Prix: 10 €</h1>".encode())

    back = response_loads(response_dumps(page))

    assert (type(back), back.url, back.status, back.body) == (HtmlResponse, URL, 200, page.body)
    assert back.headers[b"ETag"] == b'"abc"'


def test_a_forged_or_inflating_entry_is_a_miss_not_a_page(monkeypatch):
    """A packaged version's child may write its source's cache, which a crawl in a worker process reads later."""
    import json
    import zlib

    from runtime.incremental import cache

    monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 1024 * 1024)
    bomb = zlib.compress(b'{"url": "' + b"a" * (2 * 1024 * 1024) + b'"}')
    forged = [zlib.compress(json.dumps(record).encode()) for record in ({"url": 1}, {"url": URL, "status": "200"})]
    for data in (bomb, b"not zlib", zlib.compress(b"[1, 2]"), *forged):
        assert response_loads(data) is None


def test_incremental_needs_a_scope_and_no_opt_out():
    assert incremental_on({SCOPE_SETTING: "x"})
    assert not incremental_on({})
    assert not incremental_on({SCOPE_SETTING: "x", "TRAWL_INCREMENTAL": False})
    assert not incremental_on({SCOPE_SETTING: "x", "TRAWL_INCREMENTAL": "false"})


def test_a_304_hands_back_the_stored_page_and_counts_what_it_saved():
    crawler = trawl_crawler(settings_dict={SCOPE_SETTING: "trawl:test-incremental:s1"})
    crawler.spider = crawler._create_spider("test")
    middleware = IncrementalCacheMiddleware.from_crawler(crawler)
    middleware.storage.open_spider(crawler.spider)

    async def run() -> tuple[Response, dict]:
        first = Request(URL)
        assert await middleware.process_request(first) is None
        await middleware.process_response(first, HtmlResponse(URL, headers=VALIDATED, body=b"<p>page</p>"))
        again = Request(URL)
        assert await middleware.process_request(again) is None
        sent_headers = dict(again.headers)
        kept = await middleware.process_response(again, Response(URL, status=304, headers=VALIDATED))
        await loop_redis_close()
        return kept, sent_headers

    kept, sent = asyncio.run(run())

    assert sent[b"If-None-Match"] == [b'"abc"']
    assert (kept.status, kept.body) == (200, b"<p>page</p>")
    assert crawler.stats.get_value("incremental/fetches_avoided") == 1
    assert crawler.stats.get_value("incremental/bytes_avoided") == len(b"<p>page</p>")


def test_lastmod_memory_skips_entries_not_newer_than_last_time():
    memory = LastmodMemory(redis_url="redis://unused", key="k", ttl=60)
    memory.known = {"a": lastmod_value("2026-11-01"), "b": lastmod_value("2026-11-01T10:00:00Z")}

    assert memory.unchanged("a", "2026-11-01")
    assert memory.unchanged("b", "2026-11-01T09:00:00+00:00")
    assert not memory.unchanged("b", "2026-11-02")
    assert not memory.unchanged("c", "2026-11-01"), "never seen: taken"
    assert not memory.unchanged("a", None) and not memory.unchanged("a", "soon"), "no readable lastmod: taken"
    assert memory.seen == {"a": "2026-11-01", "b": "2026-11-02", "c": "2026-11-01"}


@pytest.mark.django_db
def test_source_crawls_get_a_cache_scope_and_a_source_may_opt_out(builtins):
    from crawls.services.jobs import job_create
    from registry.models import ScraperVersion
    from sources.services.sources import source_create

    source = source_create(url="http://shop.test/list-1.html", scraper="link")
    version = ScraperVersion.objects.filter(scraper__name="link").first()
    job = job_create(url=source.url, source=source)
    adhoc = job_create(url=source.url)

    assert scrapy_settings_for(spec=crawl_spec_build(job=job, version=version))[SCOPE_SETTING].endswith(
        f"incremental:source:{source.pk}"
    )
    assert SCOPE_SETTING not in scrapy_settings_for(spec=crawl_spec_build(job=adhoc, version=version))
    source.config = {"TRAWL_INCREMENTAL": False}
    assert scrapy_settings_for(spec=crawl_spec_build(job=job, version=version))["TRAWL_INCREMENTAL"] is False
    assert scrapy_settings_for(spec=crawl_spec_build(job=job, version=version))["AUTOTHROTTLE_ENABLED"] is False
