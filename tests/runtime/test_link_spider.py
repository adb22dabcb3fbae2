"""The built-in `link` spider against hand-made responses: what it yields and which links it follows."""

from __future__ import annotations

import asyncio
import time

import pytest
from scrapy.exceptions import CloseSpider
from scrapy.http import Request, Response

from runtime.spiders.link import LinkSpider, host_allowed, parse_cookie
from tests.runtime.spider_pages import START, page, run


def start_requests(spider) -> list[Request]:
    async def collect():
        return [request async for request in spider.start()]

    return asyncio.run(collect())


def link_spider(url: str = START, **options) -> LinkSpider:
    return LinkSpider(url=url, start_urls=[url], options=options, config={})


def test_link_spider_yields_one_item_per_page():
    items, _ = run(link_spider().parse(page(depth=0)))

    assert items == [{"url": START, "status": 200, "title": "List 1", "_depth": 0}]


def test_maxdepth_zero_follows_nothing():
    _, requests = run(link_spider().parse(page(depth=0)))

    assert requests == []


def test_maxdepth_follows_links_one_level_deeper_then_stops():
    spider = link_spider(maxdepth=1)

    _, requests = run(spider.parse(page(depth=0)))
    _, deeper = run(spider.parse(page(url="http://shop.test:8080/product-1.html", depth=1)))

    assert {r.meta["trawl_depth"] for r in requests} == {1}
    assert "http://shop.test:8080/product-1.html" in {r.url for r in requests}
    assert deeper == []


def test_stays_on_the_start_host_even_with_a_port():
    _, requests = run(link_spider(maxdepth=1).parse(page(depth=0)))

    urls = {r.url for r in requests}
    assert "http://shop.test:8080/list-2.html" in urls
    assert "http://shop.test:8080/cat/shoes" in urls
    assert "http://elsewhere.test/page" not in urls


def test_start_host_on_a_port_without_dots_is_followed():
    start = "http://127.0.0.1:8000/"
    body = '<a href="/a">a</a><a href="http://127.0.0.1:9000/b">b</a><a href="http://10.0.0.1:8000/c">c</a>'

    _, requests = run(link_spider(start, maxdepth=1).parse(page(url=start, body=body, depth=0)))

    assert {r.url for r in requests} == {"http://127.0.0.1:8000/a", "http://127.0.0.1:9000/b"}


def test_allowed_domains_include_their_subdomains():
    _, requests = run(link_spider(maxdepth=1, allowed_domains=["shop.test"]).parse(page(depth=0)))

    urls = {r.url for r in requests}
    assert "http://cdn.shop.test/promo" in urls
    assert "http://elsewhere.test/page" not in urls


def test_allowed_domains_replace_the_start_host():
    _, requests = run(link_spider(maxdepth=1, allowed_domains=["elsewhere.test"]).parse(page(depth=0)))

    assert [r.url for r in requests] == ["http://elsewhere.test/page"]


def test_host_allowed_compares_host_names_not_suffixes():
    assert host_allowed("http://shop.test:8080/x", ["shop.test"])
    assert host_allowed("http://WWW.Shop.Test/x", ["shop.test"])
    assert not host_allowed("http://notshop.test/x", ["shop.test"])
    assert not host_allowed("http://shop.test.evil/x", ["shop.test"])


def test_allow_and_deny_regex_filter_followed_links():
    spider = link_spider(maxdepth=1, allow_regex=[r"/(product|cat)/?"], deny_regex=[r"/cat/hats"])

    _, requests = run(spider.parse(page(depth=0)))

    assert {r.url for r in requests} == {
        "http://shop.test:8080/product-1.html",
        "http://shop.test:8080/product-2.html",
        "http://shop.test:8080/cat/shoes",
    }


def test_links_to_binary_files_are_not_followed_by_default():
    _, requests = run(link_spider(maxdepth=1).parse(page(depth=0)))

    assert "http://shop.test:8080/logo.png" not in {r.url for r in requests}


def test_deny_extensions_can_be_overridden():
    _, requests = run(link_spider(maxdepth=1, deny_extensions=[]).parse(page(depth=0)))

    assert "http://shop.test:8080/logo.png" in {r.url for r in requests}


def test_attrs_are_copied_into_every_item():
    items, _ = run(link_spider(attrs={"team": "pricing", "run": 7}).parse(page(depth=0)))

    assert items[0]["team"] == "pricing"
    assert items[0]["run"] == 7
    assert items[0]["url"] == START


def test_cookie_header_is_parsed():
    assert parse_cookie("session=abc; theme = dark ;token=a=b==; junk") == {
        "session": "abc",
        "theme": "dark",
        "token": "a=b==",
    }
    assert parse_cookie("") == {}


def test_cookies_go_with_the_start_request_and_followed_links():
    spider = link_spider(maxdepth=1, cookie="session=abc; geo=de")

    [first] = start_requests(spider)
    _, followed = run(spider.parse(page(depth=0)))

    assert first.url == START
    assert first.cookies == {"session": "abc", "geo": "de"}
    assert first.meta["trawl_depth"] == 0
    assert followed and all(r.cookies == {"session": "abc", "geo": "de"} for r in followed)


def test_expired_crawl_closes_the_spider():
    spider = link_spider(maxdepth=3, expires=int(time.time()) - 1)

    with pytest.raises(CloseSpider) as closed:
        run(spider.parse(page(depth=0)))

    assert closed.value.reason == "expired"


def test_crawl_that_has_not_expired_runs():
    items, _ = run(link_spider(expires=int(time.time()) + 3600).parse(page(depth=0)))

    assert len(items) == 1


def test_non_html_response_is_an_item_without_links():
    response = Response(url="http://shop.test:8080/file.bin", body=b"\x00\x01", request=Request(START))

    items, requests = run(link_spider(maxdepth=2).parse(response))

    assert items == [{"url": "http://shop.test:8080/file.bin", "status": 200, "title": "", "_depth": 0}]
    assert requests == []


def test_link_spider_needs_a_url():
    with pytest.raises(ValueError, match="needs a start `url`"):
        LinkSpider(options={})


def test_allowed_domain_written_with_a_port_still_matches_its_host():
    assert host_allowed("http://shop.test:8080/a", ["shop.test:8080"])
    assert host_allowed("http://www.shop.test/a", ["shop.test:8080"])
    assert not host_allowed("http://other.test:8080/a", ["shop.test:8080"])
