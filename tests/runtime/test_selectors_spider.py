"""The built-in `selectors` spider against hand-made responses: what it yields and which links it follows."""

from __future__ import annotations

import pytest
import scrapy

from runtime.spiders.link import LinkSpider
from runtime.spiders.selectors import SelectorsSpider
from tests.crawler import trawl_crawler
from tests.runtime.spider_pages import START, page, run


def selectors_spider(**config) -> SelectorsSpider:
    crawler = trawl_crawler(SelectorsSpider)  # as Scrapy builds a spider: its extraction budget is a crawl setting
    return SelectorsSpider.from_crawler(crawler, url=START, start_urls=[START], options={}, config=config)


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
