"""The `demo_shop` scraper's spider: walks the demo shop from whatever page a job starts on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from runtime.spiders.base import TrawlSpider
from runtime.spiders.discovery import discovered


def stock_of(response: Response) -> bool | None:
    """True/False from the page's stock marker; None when the page has none (so it is not mistaken for sold out)."""
    marker = response.css(".stock")
    if not marker:
        return None
    return "in-stock" in (marker.attrib.get("class") or "").split()


class DemoShopSpider(TrawlSpider):
    """Hub → category lists → (pagination, product pages) → one item per product.

    Setting `DEMO_SHOP_EXTRACT_STOCK` (the canary version turns it on) adds an `in_stock` field.
    """

    name = "demo_shop"
    extract_stock = False

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> DemoShopSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.extract_stock = crawler.settings.getbool("DEMO_SHOP_EXTRACT_STOCK")
        return spider

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """The start page may be any kind of demo page: tell which from what it holds."""
        if response.css("a.category"):
            yield from self.parse_hub(response)
        elif response.css(".product-card"):
            yield from self.parse_list(response)
        elif response.css("h1.title"):
            yield from self.parse_product(response)
        else:
            self.logger.warning("%s is not a demo shop page (no categories, products or product details)", response.url)

    def parse_hub(self, response: Response) -> Iterator[Any]:
        """Follow each category; a `discovery` source's job reports them instead, and they become list sources."""
        for link in response.css("a.category"):
            if getattr(self, "strategy", "deep") == "discovery":
                yield discovered(response.urljoin(link.attrib["href"]))
            else:
                yield response.follow(link, callback=self.parse_list)

    def parse_list(self, response: Response) -> Iterator[scrapy.Request]:
        for link in response.css(".product-card a.product-link"):
            yield response.follow(link, callback=self.parse_product)
        for link in response.css("a.next"):
            yield response.follow(link, callback=self.parse_list)

    def parse_product(self, response: Response) -> Iterator[dict[str, Any]]:
        image = response.css("img.product-image::attr(src)").get()
        item = {
            "sku": response.css(".sku::text").get(default="").strip(),
            "title": response.css("h1.title::text").get(default="").strip(),
            "price": response.css("span.price::text").get(default="").strip(),
            "category": response.css(".category-name::text").get(default="").strip(),
            "image": response.urljoin(image) if image else "",
            "url": response.url,
        }
        # A product page without its identity means the markup changed: fail loudly rather than store junk.
        if not (item["sku"] and item["title"]):
            raise ValueError(f"no sku or title on product page {response.url}: has the markup changed?")
        if self.extract_stock:
            item["in_stock"] = stock_of(response)
        yield item
