"""The response that made a spider raise is kept (bounded), stored with the job and served as inert text."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from twisted.python.failure import Failure

from crawls.logs.error_pages import job_error_pages_store
from crawls.models import CrawlJob, JobErrorPage, JobStatus
from registry.models import Scraper
from runtime.watch.error_pages import ErrorPages, error_page_fields, error_page_received, error_pages_drain
from tests.clients import client_for
from tests.crawler import trawl_crawler

pytestmark = pytest.mark.django_db


def raised(message: str) -> Failure:
    try:
        raise KeyError(message)
    except KeyError:
        return Failure()


def page(url: str, body: bytes) -> HtmlResponse:
    return HtmlResponse(url, body=body, headers={"Content-Type": "text/html"}, request=Request(url))


def test_the_extension_keeps_at_most_n_bodies_each_cut_at_its_bound(caplog, settings):
    settings.TRAWL_ERROR_PAGES_MAX, settings.TRAWL_ERROR_PAGE_MAX_BYTES = 2, 10  # the operator's: pinned per crawl
    crawler = trawl_crawler(settings_dict={"TRAWL_FEED_PARAMS": {"job_id": "j1", "attempt": 2}})
    crawler.stats.open_spider()
    keeper = ErrorPages.from_crawler(crawler)

    for n in range(3):
        keeper.spider_error(raised("price"), page(f"http://shop.test/{n}", b"<html>" + b"x" * 100), None)

    kept = error_pages_drain(crawler)
    assert [(p.number, p.url, len(p.body), p.size) for p in kept] == [
        (2001, "http://shop.test/0", 10, 106),
        (2002, "http://shop.test/1", 10, 106),
    ]
    assert kept[0].error == "KeyError: 'price'"
    assert "/api/jobs/j1/error-pages/2001/" in caplog.text
    assert error_pages_drain(crawler) == []


def test_a_page_a_packaged_child_sends_is_kept_only_if_its_fields_check_out():
    (sent,) = kept_pages(1)
    fields = error_page_fields(sent)

    assert error_page_received(fields, max_bytes=1000) == sent
    assert error_page_received(fields, max_bytes=8) is None  # over the bound the child was given: not honest
    for hostile in ({"body": "%%%"}, {"number": 2**40}, {"status": "200"}, {"url": ["x"]}, {"size": -1}):
        assert error_page_received({**fields, **hostile}, max_bytes=1000) is None, hostile


@pytest.fixture
def job(requester, builtins):
    return CrawlJob.objects.create(
        url="http://shop.test/", scraper=Scraper.objects.get(name="link"), requester=requester, status=JobStatus.FAILED
    )


def kept_pages(count: int, *, attempt: int = 1):
    crawler = trawl_crawler(settings_dict={"TRAWL_FEED_PARAMS": {"job_id": "j", "attempt": attempt}})
    crawler.stats.open_spider()
    keeper = ErrorPages.from_crawler(crawler)
    for n in range(count):
        keeper.spider_error(raised("x"), page(f"http://shop.test/{n}", b"<script>alert(1)</script>"), None)
    return error_pages_drain(crawler)


def test_a_job_keeps_at_most_the_bound_across_attempts(job, settings):
    settings.TRAWL_ERROR_PAGES_MAX = 3

    assert job_error_pages_store(job=job, kept=kept_pages(2, attempt=1)) == 2
    assert job_error_pages_store(job=job, kept=kept_pages(2, attempt=2)) == 1
    assert list(JobErrorPage.objects.filter(job=job).values_list("number", flat=True)) == [1001, 1002, 2001]


def test_the_api_lists_and_serves_a_kept_page_as_inert_text_to_its_requester_only(api, job):
    job_error_pages_store(job=job, kept=kept_pages(1))

    listed = api.get(f"/api/jobs/{job.pk}/error-pages/").json()
    body = api.get(listed[0]["body_url"])

    assert [(row["number"], row["status"], row["url"]) for row in listed] == [(1001, 200, "http://shop.test/0")]
    assert body.content == b"<script>alert(1)</script>"
    assert body["Content-Type"] == "text/plain"
    assert body["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in body["Content-Security-Policy"]
    assert body["X-Trawl-Content-Type"] == "text/html"
    assert client_for("mallory").get(f"/api/jobs/{job.pk}/error-pages/1001/").status_code == 404


def test_the_admin_job_page_links_the_kept_page(admin_client, job):
    job_error_pages_store(job=job, kept=kept_pages(1))

    page_html = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()
    served = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/error-pages/1001/")

    assert f'href="/admin/crawls/crawljob/{job.pk}/error-pages/1001/"' in page_html
    assert served.content == b"<script>alert(1)</script>" and served["Content-Type"] == "text/plain"
