"""Only http and https leave a crawl (runtime/guard/schemes.py); the job counts what was refused. End to end:
tests/security/test_schemes.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scrapy import Request
from scrapy.http import Response
from scrapy.settings import Settings

from runtime.bridge.outcome import classify, job_stats
from runtime.bridge.stats import CrawlStats
from runtime.guard.schemes import SchemeGate, SchemeRefused, allowed_schemes


def gate(*extra: str) -> SchemeGate:
    stats = CrawlStats(SimpleNamespace(settings=Settings()))
    return SchemeGate(allowed=allowed_schemes(list(extra)), stats=stats)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "file://127.0.0.2/proc/self/environ",
        "FILE:///etc/hostname",
        "s3://bucket/key",
        "ftp://127.0.0.1/pub/",
        "data:text/html,<title>x</title>",
        "gopher://127.0.0.1:6379/_FLUSHALL",
    ],
)
def test_every_other_scheme_is_refused_and_counted(url):
    guard = gate()

    with pytest.raises(SchemeRefused):
        guard.process_request(Request(url))

    assert guard.stats.get_value("schemes/refused") == 1


def test_http_and_https_pass():
    guard = gate()

    assert guard.process_request(Request("http://shop.test/")) is None
    assert guard.process_request(Request("https://shop.test/robots.txt")) is None
    assert guard.stats.get_value("schemes/refused") is None


def test_a_scheme_an_admin_allowed_passes():
    guard = gate("ftp")

    assert guard.process_request(Request("ftp://files.test/pub/")) is None
    with pytest.raises(SchemeRefused):
        guard.process_request(Request("file:///etc/passwd"))


def test_a_redirect_to_another_scheme_is_counted():
    guard = gate()
    request = Request("http://shop.test/go")
    for location in (b"file:///etc/passwd", b"http://shop.test/next", b"/relative"):
        response = Response(request.url, status=302, headers={"Location": location}, request=request)
        assert guard.process_response(request, response) is response

    assert guard.stats.get_value("schemes/refused") == 1


def test_the_job_stats_carry_refused_scheme_and_a_crawl_that_got_nothing_else_is_blocked_target():
    stats = job_stats({"schemes/refused": 3, "downloader/response_status_count/302": 1, "downloader/request_count": 1})

    assert stats["refused_scheme"] == 3
    verdict = classify(stats=stats)
    assert verdict.error_class == "blocked_target"
    assert "scheme" in verdict.message

    fetched = job_stats({"schemes/refused": 3, "downloader/response_status_count/200": 1})
    assert classify(stats=fetched).error_class == ""  # a page came: the refused links do not fail the job
