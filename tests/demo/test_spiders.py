"""DemoShopSpider on hand-made responses built from generated pages: no network."""

from __future__ import annotations

import pytest
import scrapy
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from demo.generate import catalogue, generate_site
from demo.spiders import DemoShopSpider
from runtime.spiders.discovery import is_discovered

BASE = "http://127.0.0.1:8001"
SHOP = {"categories": 2, "products_per_category": 12, "per_page": 5}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo-site")
    generate_site(path, BASE, **SHOP)
    return path


def response_for(root, path: str) -> HtmlResponse:
    return HtmlResponse(url=f"{BASE}/{path}", body=(root / path).read_bytes(), encoding="utf-8")


def spider(settings: dict | None = None) -> DemoShopSpider:
    crawler = get_crawler(DemoShopSpider, settings or {})
    return DemoShopSpider.from_crawler(crawler, url=f"{BASE}/index.html")


def test_hub_yields_one_request_per_category_list(root):
    output = list(spider().parse(response_for(root, "index.html")))

    assert [request.url for request in output] == [
        f"{BASE}/category/kitchen/page-1.html",
        f"{BASE}/category/garden/page-1.html",
    ]
    assert all(request.callback.__name__ == "parse_list" for request in output)


def test_list_yields_its_product_pages_and_the_next_page(root):
    output = list(spider().parse(response_for(root, "category/kitchen/page-2.html")))

    products = [r.url for r in output if r.callback.__name__ == "parse_product"]
    pages = [r.url for r in output if r.callback.__name__ == "parse_list"]
    expected = [f"{BASE}/product/{p.sku}.html" for p in catalogue(categories=2, products_per_category=12)[0].products]
    assert all(isinstance(request, scrapy.Request) for request in output)
    assert products == expected[5:10]
    assert pages == [f"{BASE}/category/kitchen/page-3.html"]


def test_last_list_page_has_no_next_request(root):
    output = list(spider().parse(response_for(root, "category/kitchen/page-3.html")))

    assert len(output) == 2
    assert all(request.callback.__name__ == "parse_product" for request in output)


def test_product_page_yields_the_full_item(root):
    product = catalogue(categories=2, products_per_category=12)[1].products[3]

    (item,) = spider().parse(response_for(root, f"product/{product.sku}.html"))

    assert item == {
        "sku": product.sku,
        "title": product.title,
        "price": product.price,
        "category": "Garden",
        "image": f"{BASE}/img/{product.sku}.svg",
        "url": f"{BASE}/product/{product.sku}.html",
    }


def test_canary_setting_adds_in_stock(root):
    products = [p for c in catalogue(categories=2, products_per_category=12) for p in c.products]
    canary = spider({"DEMO_SHOP_EXTRACT_STOCK": True})

    seen = {p.sku: next(iter(canary.parse(response_for(root, f"product/{p.sku}.html"))))["in_stock"] for p in products}

    assert seen == {p.sku: p.in_stock for p in products}
    assert set(seen.values()) == {True, False}


def test_product_page_without_sku_fails_loudly():
    response = HtmlResponse(url=f"{BASE}/product/x.html", body=b"<h1 class='title'>Lamp</h1>", encoding="utf-8")

    with pytest.raises(ValueError, match="markup changed"):
        list(spider().parse(response))


def test_a_discovery_job_on_the_hub_reports_the_categories_instead_of_following_them(root):
    crawler = get_crawler(DemoShopSpider, {})
    discovering = DemoShopSpider.from_crawler(crawler, url=f"{BASE}/index.html", strategy="discovery")

    output = list(discovering.parse(response_for(root, "index.html")))

    assert all(is_discovered(record) for record in output)
    assert [record["url"] for record in output] == [
        f"{BASE}/category/kitchen/page-1.html",
        f"{BASE}/category/garden/page-1.html",
    ]
