"""Structured data (JSON-LD, microdata, OpenGraph) filling the fields a `selectors` config leaves empty."""

from __future__ import annotations

import pytest

from runtime.extraction.structured import StructuredData
from runtime.inputs.patterns import PatternError
from runtime.spiders.selectors import SelectorsSpider
from tests.crawler import trawl_crawler
from tests.fixtures.pages import product_page
from tests.runtime.spider_pages import page, run

URL = "http://shop.test/trail-runner-2.html"
MICRODATA = """<html><head><title>Kettle</title></head><body>
<div itemscope itemtype="https://schema.org/Organization"><span itemprop="name">Kitchen Shop Ltd</span></div>
<div itemscope itemtype="https://schema.org/Product"><h1 itemprop="name">Steel Kettle</h1>
  <div itemprop="brand" itemscope itemtype="https://schema.org/Brand"><span itemprop="name">Boilwell</span></div>
  <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
    <span itemprop="price" content="24.50">24,50 €</span><meta itemprop="priceCurrency" content="EUR"></div>
</div></body></html>"""


def structured(body: str) -> StructuredData:
    return StructuredData(page(URL, body).selector.root, base_url=URL)


def spider_for(settings: dict | None = None, **config) -> SelectorsSpider:
    crawler = trawl_crawler(SelectorsSpider, settings)
    spider = SelectorsSpider.from_crawler(crawler, url=URL, start_urls=[URL], options={}, config=config)
    crawler.spider = spider
    return spider


def test_json_ld_fields_by_name_from_the_main_entity_of_a_graph():
    data = structured(product_page())

    assert data.value("price") == ("89.90", "json-ld")
    assert data.value("currency") == ("EUR", "json-ld")
    assert data.value("title") == ("Trail Runner 2", "json-ld")  # the Product's name, not the breadcrumb's
    assert data.value("brand") == ("Fellfoot", "json-ld")
    assert data.value("image") == ("/img/tr2.jpg", "json-ld")
    assert data.value("description") == ("Light trail shoe.", "opengraph")  # JSON-LD has none
    assert data.value("colour") is None


def test_microdata_nested_items_and_no_site_furniture():
    data = structured(MICRODATA)

    assert data.value("title") == ("Steel Kettle", "microdata")
    assert data.value("price") == ("24.50", "microdata")
    assert data.value("currency") == ("EUR", "microdata")
    assert data.value("brand") == ("Boilwell", "microdata")


def test_a_broken_json_ld_script_leaves_the_other_syntaxes():
    head = '<meta property="og:title" content="Only OG"><script type="application/ld+json">{"a": [[[</script>'
    data = structured(f"<html><head>{head}</head><body></body></html>")

    assert data.value("title") == ("Only OG", "opengraph")
    assert data.failed == ["json-ld"]


def test_microdata_too_nested_to_read_cheaply_is_left_out_and_json_ld_still_answers():
    # 300 nested items: 16 KB that extruct's microdata walk takes 13 s over, refused by its measured shape
    nested = "<div itemscope><div itemprop='x' itemscope>" * 300 + "</div>" * 600
    data = structured(product_page().replace("<body>", f"<body>{nested}"))

    assert data.value("price") == ("89.90", "json-ld")
    assert data.value("colour") is None
    assert data.failed == ["microdata"]


def test_a_selector_that_misses_the_price_gets_it_from_json_ld_with_provenance():
    spider = spider_for(fields={"title": "h1::text", "price": ".price::text", "sku": ".sku::text"})

    items, _ = run(spider.parse(page(URL, product_page())))

    assert items == [
        {
            "title": "Trail Runner 2",
            "price": "89.90",
            "sku": "TR-2",
            "url": URL,
            "_provenance": {"title": "selector", "price": "json-ld", "sku": "json-ld"},
        }
    ]
    assert spider.crawler.stats.get_value("structured_data/json-ld") == 2


def test_when_every_selector_matches_structured_data_is_not_read():
    spider = spider_for(fields={"title": "h1::text", "price": ".price::text"})

    items, _ = run(spider.parse(page(URL, product_page(shown_price=True))))

    assert items == [{"title": "Trail Runner 2", "price": "89.90", "url": URL}]
    assert spider.crawler.stats.get_value("structured_data/pages") is None


def test_blocks_of_a_list_page_are_not_filled_from_the_page_data():
    body = product_page().replace("<body>", '<body><div class="card"><h2>Other shoe</h2></div>')
    spider = spider_for(item=".card", fields={"title": "h2::text", "price": ".price::text"})

    items, _ = run(spider.parse(page(URL, body)))

    assert items == [{"title": "Other shoe", "price": None, "url": URL}]


def test_turned_off_by_config_and_bounded_by_page_size():
    fields = {"price": ".price::text"}
    off = spider_for(fields=fields, structured_data=False)
    small = spider_for({"TRAWL_STRUCTURED_DATA_MAX_BYTES": 100}, fields=fields)

    assert run(off.parse(page(URL, product_page())))[0] == [{"price": None, "url": URL}]
    assert run(small.parse(page(URL, product_page())))[0] == [{"price": None, "url": URL}]
    assert small.crawler.stats.get_value("structured_data/too_large") == 1
    with pytest.raises(PatternError, match="structured_data"):
        spider_for(fields=fields, structured_data="yes")
