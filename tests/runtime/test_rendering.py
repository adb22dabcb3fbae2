"""runtime/rendering's rules, without a browser: which requests render, and what a rendered page may fetch
(the e2e tests run them in Chromium: tests/e2e/test_render_e2e.py, tests/security/test_render_guard.py)."""

from __future__ import annotations

import asyncio

import pytest

from runtime.guard.resolver import CrawlResolver
from runtime.rendering.dispatch import render_wanted
from runtime.rendering.subrequests import SubrequestRule


@pytest.mark.parametrize(
    ("mode", "meta", "renders"),
    [
        ("request", {}, False),
        ("request", {"playwright": True}, True),  # scrapy-playwright's idiom
        ("request", {"render": True}, True),
        ("always", {}, True),
        ("always", {"playwright": False}, False),  # one request kept plain
        ("always", {"dont_obey_robotstxt": True}, False),  # robots.txt: text, never rendered
        ("never", {"playwright": True}, False),  # the operator's switch wins over the spider's meta
    ],
)
def test_which_requests_render(mode, meta, renders):
    assert render_wanted(mode, meta) is renders


def rule(*, guarded: bool, allowed: tuple[str, ...] = ()) -> SubrequestRule:
    resolver = CrawlResolver(guarded=guarded, allowed=list(allowed), servers=[]) if guarded else None
    # stats: a refusal itself counts nothing
    return SubrequestRule.of(allowed_schemes=("http", "https"), resolver=resolver, resources=(), stats=None)


def refusal(checked: SubrequestRule, url: str) -> str:
    return asyncio.run(checked.refusal(url))


def test_a_rendered_pages_requests_keep_to_the_crawls_schemes():
    checked = rule(guarded=False)
    assert refusal(checked, "http://127.0.0.1/api") == ""  # unguarded: anywhere the name leads
    assert refusal(checked, "data:text/plain,x") == ""  # built inside the page, nothing leaves the machine
    assert "scheme 'file'" in refusal(checked, "file:///etc/passwd")
    assert "scheme 'ftp'" in refusal(checked, "ftp://example.com/")


def test_a_guarded_crawls_rendered_pages_reach_public_or_allow_listed_addresses_only():
    checked = rule(guarded=True, allowed=("127.0.0.2/32",))
    assert "private, loopback" in refusal(checked, "http://127.0.0.1:6379/")
    assert "private, loopback" in refusal(checked, "http://[::ffff:10.0.0.1]/")
    assert "private, loopback" in refusal(checked, "http://169.254.169.254/latest/meta-data/")
    assert refusal(checked, "http://127.0.0.2:8000/page") == ""
    assert refusal(checked, "http://8.8.8.8/") == ""


class FrozenBrowser:
    """What a rendering handler looks like to the crawl when Chromium stopped answering: a download never ends."""

    async def download_request(self, request):
        await asyncio.Event().wait()


def test_a_rendered_download_chromium_never_answers_ends_as_a_download_timeout(monkeypatch):
    """Bounded: twice TRAWL_RENDER_TIMEOUT plus RENDER_SLACK_SECONDS (60 s at the defaults; shrunk here, the
    mechanism), then the request fails as a timeout Scrapy retries, instead of holding its slot and its job forever."""
    from scrapy import Request
    from twisted.internet.error import TimeoutError as DownloadTimeout

    from runtime.rendering import dispatch
    from tests.crawler import trawl_crawler

    monkeypatch.setattr(dispatch, "RENDER_SLACK_SECONDS", 0.1)
    handler = dispatch.RenderOnDemandDownloadHandler.__new__(dispatch.RenderOnDemandDownloadHandler)
    handler._crawler = trawl_crawler(settings_dict={"TRAWL_RENDER_TIMEOUT": 0.05})
    handler._renderer = FrozenBrowser()

    with pytest.raises(DownloadTimeout, match=r"rendering https://shop\.test/ took longer than 0 s"):
        asyncio.run(handler._render(Request("https://shop.test/", meta={"render": True})))
    assert handler._crawler.stats.get_value("render/deadline_passed") == 1
