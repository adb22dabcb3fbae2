"""The generated demo shop has the pages, links and sitemap that the demo spider and sources rely on."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from parsel import Selector

from demo.generate import catalogue, generate_site

BASE = "http://shop.test:8001"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-site")
    generate_site(root, BASE + "/", categories=3, products_per_category=12, per_page=5)
    return root


def html(path) -> Selector:
    return Selector(text=path.read_text(encoding="utf-8"))


def test_hub_links_every_category_to_its_first_list_page(site):
    links = html(site / "index.html").css("a.category::attr(href)").getall()

    assert links == ["category/kitchen/page-1.html", "category/garden/page-1.html", "category/audio/page-1.html"]
    assert all((site / link).exists() for link in links)


def test_list_pages_paginate_through_every_product_of_a_category(site):
    skus, page, pages = [], site / "category/garden/page-1.html", 0
    while page:
        pages += 1
        doc = html(page)
        cards = doc.css(".product-card")
        assert all(card.css(".product-title::text").get() and card.css(".price::text").get() for card in cards)
        skus += [
            re.search(r"([A-Z]+-\d+)\.html", href).group(1) for href in cards.css("a.product-link::attr(href)").getall()
        ]
        following = doc.css("a.next::attr(href)").get()
        page = page.parent / following if following else None

    assert pages == 3  # 12 products, 5 per page
    assert skus == [product.sku for product in catalogue(categories=3, products_per_category=12)[1].products]
    assert all((site / "product" / f"{sku}.html").exists() for sku in skus)


def test_product_page_shows_title_price_image_sku_category_and_stock(site):
    product = catalogue(categories=3, products_per_category=12)[0].products[0]
    doc = html(site / "product" / f"{product.sku}.html")

    assert doc.css("h1.title::text").get() == product.title
    assert doc.css("span.price::text").get() == product.price
    assert doc.css(".sku::text").get() == product.sku
    assert doc.css(".category-name::text").get() == "Kitchen"
    assert doc.css("img.product-image::attr(src)").get() == f"../img/{product.sku}.svg"
    assert (site / "img" / f"{product.sku}.svg").exists()
    assert len(doc.css(".stock.in-stock, .stock.out-of-stock")) == 1


def test_prices_come_in_several_currencies_and_formats():
    prices = [p.price for c in catalogue() for p in c.products]

    assert any(re.fullmatch(r"\$\d{1,3}(,\d{3})+\.\d\d", price) for price in prices), "no $ price over a thousand"
    assert any(re.fullmatch(r"\d+\.\d\d €", price) for price in prices)
    assert any(price.startswith("£") for price in prices)
    stock = [p.in_stock for c in catalogue() for p in c.products]
    assert True in stock and False in stock


def test_sitemap_lists_every_product_page_with_absolute_urls(site):
    namespace = {"sm": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = [loc.text for loc in ET.parse(site / "sitemap.xml").getroot().findall("sm:url/sm:loc", namespace)]

    expected = [
        f"{BASE}/product/{p.sku}.html" for c in catalogue(categories=3, products_per_category=12) for p in c.products
    ]
    assert locs == expected
    assert len(set(locs)) == 36


def test_robots_allows_everything_and_points_at_the_sitemap(site):
    assert (site / "robots.txt").read_text() == f"User-agent: *\nAllow: /\n\nSitemap: {BASE}/sitemap.xml\n"


def test_generation_is_deterministic_and_drops_stale_pages(tmp_path):
    generate_site(tmp_path / "a", BASE, categories=2, products_per_category=4)
    generate_site(tmp_path / "b", BASE, categories=3, products_per_category=4)
    generate_site(tmp_path / "b", BASE, categories=2, products_per_category=4)

    def files(root):
        return {path.relative_to(root): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}

    assert files(tmp_path / "a") == files(tmp_path / "b")
