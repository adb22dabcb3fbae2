"""The built-in `selectors` spider: a source's config describes the site, no code needed.

config = {
    "fields": {"title": "h1::text", "price": ".price::text", "image": "img::attr(src)"},
    "item": ".product-card",          # optional: one item per matching block (fields relative to it)
    "item_links": ".product a",       # optional: follow these and parse each page as one item
    "next_page": "a.next",            # optional: pagination, followed with the same rules
    "category_links": ".categories a",# optional: category pages, followed with the same rules
}
Without `item` or `item_links` the page itself is one item. Field values starting with `xpath:` are XPath.
Selectors come from requesters: runtime/inputs/xpaths.py refuses extension functions (EXSLT's `re:` regexes run
with Python's `re`) and caps their size, here when the spider starts as at submission. Extracting one page's items
stops after TRAWL_SELECTORS_PAGE_SECONDS (stat `selectors/over_budget`): a selector matching every element of a big
page, with fields that each walk the whole page again, would otherwise hold the reactor thread for minutes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import scrapy
from parsel import Selector

from runtime.inputs.xpaths import selectors_config_check
from runtime.spiders.base import TrawlSpider


def extract(selector: Selector, spec: str) -> str | None:
    found = selector.xpath(spec[6:]) if spec.startswith("xpath:") else selector.css(spec)
    value = found.get()
    return value.strip() if isinstance(value, str) else value


def link_urls(response: scrapy.http.Response, spec: str | None) -> list[str]:
    if not spec:
        return []
    # Accept either the link elements themselves or a selector ending in ::attr(href).
    nodes = response.xpath(spec[6:]) if spec.startswith("xpath:") else response.css(spec)
    # An attribute or text result has a plain string root and no element attributes.
    hrefs = [node.get() if isinstance(node.root, str) else node.attrib.get("href") for node in nodes]
    return [response.urljoin(href) for href in hrefs if href]


class SelectorsSpider(TrawlSpider):
    name = "selectors"
    page_seconds: float  # TRAWL_SELECTORS_PAGE_SECONDS: the most one page's item extraction may take

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields: dict[str, str] = dict(self.config.get("fields") or {})
        if not self.fields:
            raise ValueError("the selectors spider needs config.fields, e.g. {'title': 'h1::text'}")
        selectors_config_check(self.config)

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SelectorsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.page_seconds = crawler.settings.getfloat("TRAWL_SELECTORS_PAGE_SECONDS")
        return spider

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        config = self.config
        if config.get("item"):
            yield from self.blocks(response, config["item"])
        elif not config.get("item_links"):
            yield self.item_from(response.selector, response)
        for url in link_urls(response, config.get("item_links")):
            yield response.follow(url, callback=self.parse_item)
        for url in link_urls(response, config.get("category_links")) + link_urls(response, config.get("next_page")):
            yield response.follow(url, callback=self.parse)

    def blocks(self, response: scrapy.http.Response, spec: str) -> Iterator[dict[str, Any]]:
        """One item per block, until the page's extraction budget is spent."""
        deadline = time.monotonic() + self.page_seconds
        for block in response.css(spec):
            if time.monotonic() >= deadline:
                self.crawler.stats.inc_value("selectors/over_budget")
                self.logger.warning("%s: item extraction stopped after %.0f s", response.url, self.page_seconds)
                return
            yield self.item_from(block, response)

    def parse_item(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield self.item_from(response.selector, response)

    def item_from(self, selector: Selector, response: scrapy.http.Response) -> dict[str, Any]:
        item: dict[str, Any] = {name: extract(selector, spec) for name, spec in self.fields.items()}
        # Links inside a block are relative to the page; a block without its own link is the page itself.
        for key in ("url", "image", "link"):
            if item.get(key):
                item[key] = response.urljoin(item[key])
        item["url"] = item.get("url") or response.url
        return item
