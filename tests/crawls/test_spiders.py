"""The built-in spiders against hand-made responses: what they yield and which links they follow."""

from __future__ import annotations

import asyncio
import time

import pytest
import scrapy
from scrapy.exceptions import CloseSpider
from scrapy.http import HtmlResponse, Request, Response

from crawls.scraping.spiders.link import LinkSpider, host_allowed, parse_cookie
from crawls.scraping.spiders.selectors import SelectorsSpider

START = "http://shop.test:8080/list-1.html"

LIST_PAGE = """<html><head><title> List 1 </title></head><body>
<div class="card"><h2>Product 1</h2><a class="product" href="/product-1.html">one</a>
  <img src="/img/1.png"><span class="price">11.00</span></div>
<div class="card"><h2>Product 2</h2><a class="product" href="product-2.html">two</a>
  <img src="img/2.png"><span class="price">12.00</span></div>
<div class="card"><h2>Product 3</h2><span class="price">13.00</span></div>
<nav class="categories"><a href="/cat/shoes">Shoes</a><a href="/cat/hats">Hats</a></nav>
<a class="next" href="/list-2.html">next</a>
<a href="http://elsewhere.test/page">elsewhere</a>
<a href="http://cdn.shop.test/promo">promo</a>
<a href="/logo.png">logo</a>
</body></html>"""


def page(url: str = START, body: str = LIST_PAGE, depth: int | None = None) -> HtmlResponse:
    meta = {} if depth is None else {"trawl_depth": depth}
    return HtmlResponse(url=url, body=body.encode(), encoding="utf-8", request=Request(url, meta=meta))


def run(results) -> tuple[list[dict], list[Request]]:
    out = list(results)
    return [r for r in out if isinstance(r, dict)], [r for r in out if isinstance(r, Request)]


def start_requests(spider) -> list[Request]:
    async def collect():
        return [request async for request in spider.start()]

    return asyncio.run(collect())


def link_spider(url: str = START, **options) -> LinkSpider:
    return LinkSpider(url=url, start_urls=[url], options=options, config={})


# --- LinkSpider --------------------------------------------------------------------------------


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


# --- SelectorsSpider ---------------------------------------------------------------------------


def selectors_spider(**config) -> SelectorsSpider:
    return SelectorsSpider(url=START, start_urls=[START], options={}, config=config)


def test_without_item_selector_the_page_is_one_item():
    spider = selectors_spider(fields={"title": "title::text", "price": ".price::text"})

    items, requests = run(spider.parse(page()))

    assert items == [{"title": "List 1", "price": "11.00", "url": START}]
    assert requests == []


def test_item_blocks_yield_one_item_each_with_fields_relative_to_the_block():
    spider = selectors_spider(
        item=".card", fields={"title": "h2::text", "price": ".price::text", "url": "a::attr(href)"}
    )

    items, _ = run(spider.parse(page()))

    assert items == [
        {"title": "Product 1", "price": "11.00", "url": "http://shop.test:8080/product-1.html"},
        {"title": "Product 2", "price": "12.00", "url": "http://shop.test:8080/product-2.html"},
        {"title": "Product 3", "price": "13.00", "url": START},
    ]


def test_relative_image_becomes_absolute():
    spider = selectors_spider(item=".card", fields={"image": "img::attr(src)"})

    items, _ = run(spider.parse(page()))

    assert [item["image"] for item in items] == [
        "http://shop.test:8080/img/1.png",
        "http://shop.test:8080/img/2.png",
        None,
    ]


def test_xpath_prefix_selects_with_xpath():
    spider = selectors_spider(item=".card", fields={"title": "xpath:.//h2/text()"})

    items, _ = run(spider.parse(page()))

    assert [item["title"] for item in items] == ["Product 1", "Product 2", "Product 3"]


def test_xpath_page_field():
    spider = selectors_spider(fields={"heading": "xpath://div[@class='card'][2]/h2/text()"})

    items, _ = run(spider.parse(page()))

    assert items[0]["heading"] == "Product 2"


def test_item_links_are_followed_as_item_pages_and_the_list_is_not_an_item():
    spider = selectors_spider(item_links="a.product", fields={"title": "h1::text"})

    items, requests = run(spider.parse(page()))

    assert items == []
    assert [r.url for r in requests] == [
        "http://shop.test:8080/product-1.html",
        "http://shop.test:8080/product-2.html",
    ]
    assert all(r.callback == spider.parse_item for r in requests)


def test_item_page_is_parsed_into_one_item():
    spider = selectors_spider(item_links="a.product", fields={"title": "h1::text", "image": "img::attr(src)"})
    product = page(
        url="http://shop.test:8080/product-1.html",
        body='<html><h1> Product 1 </h1><img src="/img/1.png"></html>',
    )

    items, _ = run(spider.parse_item(product))

    assert items == [
        {
            "title": "Product 1",
            "image": "http://shop.test:8080/img/1.png",
            "url": "http://shop.test:8080/product-1.html",
        }
    ]


def test_next_page_and_category_links_are_parsed_with_the_same_rules():
    spider = selectors_spider(
        item_links="a.product", next_page="a.next", category_links=".categories a", fields={"title": "h1::text"}
    )

    _, requests = run(spider.parse(page()))

    listing = [r.url for r in requests if r.callback == spider.parse]
    assert listing == [
        "http://shop.test:8080/cat/shoes",
        "http://shop.test:8080/cat/hats",
        "http://shop.test:8080/list-2.html",
    ]


def test_link_selectors_may_end_in_attr_href():
    spider = selectors_spider(
        item_links="a.product::attr(href)", next_page="xpath://a[@class='next']/@href", fields={"title": "h1::text"}
    )

    _, requests = run(spider.parse(page()))

    assert [r.url for r in requests] == [
        "http://shop.test:8080/product-1.html",
        "http://shop.test:8080/product-2.html",
        "http://shop.test:8080/list-2.html",
    ]


def test_missing_fields_is_a_clear_error():
    with pytest.raises(ValueError, match=r"config\.fields"):
        selectors_spider(item=".card")


def test_spiders_are_scrapy_spiders_with_names():
    assert issubclass(LinkSpider, scrapy.Spider) and LinkSpider.name == "link"
    assert issubclass(SelectorsSpider, scrapy.Spider) and SelectorsSpider.name == "selectors"


def test_allowed_domain_written_with_a_port_still_matches_its_host():
    assert host_allowed("http://shop.test:8080/a", ["shop.test:8080"])
    assert host_allowed("http://www.shop.test/a", ["shop.test:8080"])
    assert not host_allowed("http://other.test:8080/a", ["shop.test:8080"])
