"""The built-in `selectors` spider: a source's config describes the site, no code needed.

config = {
    "fields": {"title": "h1::text", "price": ".price::text", "image": "img::attr(src)"},
    "item": ".product-card",          # optional: one item per matching block (fields relative to it)
    "item_links": ".product a",       # optional: follow these and parse each page as one item
    "next_page": "a.next",            # optional: pagination, followed with the same rules
    "category_links": ".categories a",# optional: category pages, followed with the same rules
    "structured_data": true,          # optional (default true): fill empty fields from the page's structured data
}
Without `item` or `item_links` the page itself is one item. Field values starting with `xpath:` are XPath.
A whole-page item (not a block's) whose selectors left fields empty gets them from the page's JSON-LD, microdata or
OpenGraph (runtime.extraction.structured, by field name), and `_provenance` says where each field came from
(`selector`, `json-ld`, `microdata`, `opengraph`); a page above TRAWL_STRUCTURED_DATA_MAX_BYTES is not read for it.
Selectors come from requesters: runtime/inputs/xpaths.py refuses extension functions (EXSLT's `re:` regexes run
with Python's `re`), walks nested in walks (work beyond nodes x depth) and caps their size, here when the spider
starts as at submission; CSS runs as the XPath that check measured (runtime.inputs.xpaths.css_xpath). Extracting one
page's items stops after TRAWL_SELECTORS_PAGE_SECONDS (stat `selectors/over_budget`): a selector matching every
element of a big page, with fields that each walk the whole page again, would otherwise hold the reactor thread for
minutes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import scrapy
from parsel import Selector

from runtime.extraction.structured import StructuredData
from runtime.inputs.xpaths import selector_xpath, selectors_config_check
from runtime.spiders.base import TrawlSpider


def extract(selector: Selector, spec: str) -> str | None:
    found = selector.xpath(selector_xpath(spec))
    value = found.get()
    return value.strip() if isinstance(value, str) else value


def link_urls(response: scrapy.http.Response, spec: str | None) -> list[str]:
    if not spec:
        return []
    # Accept either the link elements themselves or a selector ending in ::attr(href).
    nodes = response.xpath(selector_xpath(spec))
    # An attribute or text result has a plain string root and no element attributes.
    hrefs = [node.get() if isinstance(node.root, str) else node.attrib.get("href") for node in nodes]
    return [response.urljoin(href) for href in hrefs if href]


class SelectorsSpider(TrawlSpider):
    name = "selectors"
    page_seconds: float  # TRAWL_SELECTORS_PAGE_SECONDS: the most one page's item extraction may take
    field_max: int  # TRAWL_ITEM_FIELD_MAX_BYTES: past a field this long, the item is not built further
    structured_max: int  # TRAWL_STRUCTURED_DATA_MAX_BYTES: larger pages are not read for structured data

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields: dict[str, str] = dict(self.config.get("fields") or {})
        if not self.fields:
            raise ValueError("the selectors spider needs config.fields, e.g. {'title': 'h1::text'}")
        selectors_config_check(self.config)
        self.structured_data = self.config.get("structured_data", True)

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SelectorsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.page_seconds = crawler.settings.getfloat("TRAWL_SELECTORS_PAGE_SECONDS")
        spider.field_max = crawler.settings.getint("TRAWL_ITEM_FIELD_MAX_BYTES")
        spider.structured_max = crawler.settings.getint("TRAWL_STRUCTURED_DATA_MAX_BYTES")
        return spider

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        config = self.config
        if config.get("item"):
            yield from self.blocks(response, config["item"])
        elif not config.get("item_links"):
            yield self.item_from(response.selector, response, whole_page=True)
        for url in link_urls(response, config.get("item_links")):
            yield response.follow(url, callback=self.parse_item)
        for url in link_urls(response, config.get("category_links")) + link_urls(response, config.get("next_page")):
            yield response.follow(url, callback=self.parse)

    def blocks(self, response: scrapy.http.Response, spec: str) -> Iterator[dict[str, Any]]:
        """One item per block, until the page's extraction budget is spent."""
        deadline = time.monotonic() + self.page_seconds
        for block in response.xpath(selector_xpath(spec)):
            if time.monotonic() >= deadline:
                self.crawler.stats.inc_value("selectors/over_budget")
                self.logger.warning("%s: item extraction stopped after %.0f s", response.url, self.page_seconds)
                return
            yield self.item_from(block, response)

    def parse_item(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield self.item_from(response.selector, response, whole_page=True)

    def item_from(self, selector: Selector, response: scrapy.http.Response, *, whole_page: bool = False) -> dict:
        """The fields' values in `selector`; a whole page's empty ones filled from its structured data."""
        item: dict[str, Any] = {}
        for name, spec in self.fields.items():
            item[name] = extract(selector, spec)
            if len(str(item[name])) > self.field_max:
                break  # the item bound drops it (runtime.items.bounds): no more fields of that size held meanwhile
        else:
            if whole_page and self.structured_data:
                self.fill_from_structured_data(item, response)
        # Links inside a block are relative to the page; a block without its own link is the page itself.
        for key in ("url", "image", "link"):
            if item.get(key):
                item[key] = response.urljoin(item[key])
        item["url"] = item.get("url") or response.url
        return item

    def fill_from_structured_data(self, item: dict[str, Any], response: scrapy.http.Response) -> None:
        """Empty fields filled from the page's structured data, and `_provenance` saying where each field came from.
        Read only when a field is empty: a page whose selectors all match costs nothing more."""
        empty = [name for name, value in item.items() if value in (None, "")]
        if not empty:
            return
        stats = self.crawler.stats
        if len(response.body) > self.structured_max:
            stats.inc_value("structured_data/too_large")
            return
        found = StructuredData(response.selector.root, base_url=response.url)
        provenance = {name: "selector" for name, value in item.items() if value not in (None, "")}
        for name in empty:
            value = found.value(name)
            if value is not None:
                item[name], provenance[name] = value
                stats.inc_value(f"structured_data/{value[1]}")
        stats.inc_value("structured_data/pages")
        for syntax in found.failed:
            stats.inc_value(f"structured_data/unreadable/{syntax}")
        item["_provenance"] = provenance
