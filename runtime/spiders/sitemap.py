"""The built-in `sitemap` spider: reads sitemaps, sitemap indexes (gzipped too) and robots.txt, never the pages.

With strategy `discovery` (a sitemap source) each listed URL is reported as a discovered source (a product, unless
the source's config says otherwise); otherwise each is an item `{url, lastmod, changefreq, priority, sitemap}`.

config = {
    "allow": ["/product/"],  # optional: only URLs matching one of these regexes (RE2 syntax: no lookaround)
    "deny": ["/product/old-"],  # optional: never URLs matching one of these
    "follow": ["products"],  # optional: only child sitemaps of an index matching one of these
    "alternate": False,  # also take hreflang alternate links
    "max_urls": 50000,  # stop after this many URLs
}
The start URL may be a sitemap, a sitemap index, a .xml.gz of either, or a robots.txt with `Sitemap:` lines.
In a source's crawl, entries whose `lastmod` is not newer than at the source's last finished run are skipped
(stat `incremental/lastmod_skipped`; runtime/incremental/lastmod.py); `TRAWL_INCREMENTAL: false` turns that off.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy import signals
from scrapy.http import Response, XmlResponse
from scrapy.utils.gz import gunzip, gzip_magic_number
from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots

from runtime.incremental.lastmod import LastmodMemory
from runtime.inputs.patterns import patterns_compile
from runtime.spiders.base import TrawlSpider
from runtime.spiders.discovery import discovered

MAX_URLS = 50_000  # the most one sitemap file may list, by the protocol
MAX_URLS_SETTING = "TRAWL_SITEMAP_MAX_URLS"  # what a job's `max_urls` may ask for, at most


def sitemap_body(response: Response, *, max_size: int) -> bytes | None:
    """The XML of a sitemap response, gunzipped if need be; None if it is not a sitemap."""
    if isinstance(response, XmlResponse):
        return response.body
    if gzip_magic_number(response):
        return gunzip(response.body, max_size=max_size)
    if response.url.endswith((".xml", ".xml.gz")):
        return response.body
    return None


def urls_asked(value: Any) -> int:
    """The config's `max_urls` as a count (MAX_URLS when unset or not a positive integer)."""
    try:
        asked = int(value or MAX_URLS)
    except (TypeError, ValueError):
        return MAX_URLS
    return asked if asked > 0 else MAX_URLS


def urls_capped(asked: int, *, cap: int, spider: Any) -> int:
    """A job's `max_urls` within TRAWL_SITEMAP_MAX_URLS: submission refuses more, but a job stored before that check
    (or written to the database directly) is capped here, and says so in its log."""
    if cap and asked > cap:
        spider.logger.warning("config.max_urls %d is above TRAWL_SITEMAP_MAX_URLS: capped at %d", asked, cap)
        return cap
    return asked


class SitemapSpider(TrawlSpider):
    name = "sitemap"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        config = self.config
        # Requester regexes, on RE2 (linear time): a pattern RE2 cannot run stops the crawl here, naming the key.
        self.allow, self.deny, self.follow = (
            patterns_compile(config.get(key), field=f"config.{key}") for key in ("allow", "deny", "follow")
        )
        self.alternate = bool(config.get("alternate"))
        self.max_urls = urls_asked(config.get("max_urls"))
        self.discovering = getattr(self, "strategy", "deep") == "discovery"
        self.taken = 0
        self.lastmods: LastmodMemory | None = None

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SitemapSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.max_urls = urls_capped(spider.max_urls, cap=crawler.settings.getint(MAX_URLS_SETTING), spider=spider)
        spider.lastmods = LastmodMemory.from_crawler(crawler)
        if spider.lastmods is not None:
            crawler.signals.connect(spider.remember_lastmods, signal=signals.spider_closed)
        return spider

    async def start(self) -> Any:
        if self.lastmods is not None:
            await self.lastmods.load()
        async for request in super().start():
            yield request

    async def remember_lastmods(self, spider: Any, reason: str) -> None:
        # Only a finished crawl: after a failed one, the next run must still take what this one never delivered.
        if self.lastmods is not None and reason == "finished":
            await self.lastmods.save()

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if response.url.endswith("/robots.txt"):
            for url in sitemap_urls_from_robots(response.body, base_url=response.url):
                yield scrapy.Request(url, callback=self.parse)
            return
        try:
            body = sitemap_body(response, max_size=self.crawler.settings.getint("DOWNLOAD_MAXSIZE"))
        except (ValueError, OSError, EOFError, zlib.error) as exc:  # a gzip bomb, or broken gzip
            self.crawler.stats.inc_value("sitemap/invalid")
            self.logger.warning("skipping sitemap %s: %s", response.url, exc)
            return
        sitemap = Sitemap(body) if body else None
        if sitemap is None or sitemap.type not in ("sitemapindex", "urlset"):
            self.crawler.stats.inc_value("sitemap/invalid")
            self.logger.warning("%s is not a sitemap", response.url)
            return
        self.crawler.stats.inc_value("sitemap/sitemaps")
        if sitemap.type == "sitemapindex":
            for entry in sitemap:
                if not self.follow or self.follow.search(entry["loc"]):
                    yield scrapy.Request(entry["loc"], callback=self.parse)
            return
        yield from self.entries(sitemap, response.url)

    def entries(self, sitemap: Sitemap, sitemap_url: str) -> Iterator[dict[str, Any]]:
        for entry in sitemap:
            urls = [entry["loc"], *(entry.get("alternate", []) if self.alternate else [])]
            for url in urls:
                if not self.wanted(url):
                    self.crawler.stats.inc_value("sitemap/filtered")
                    continue
                if self.taken >= self.max_urls:
                    self.crawler.stats.inc_value("sitemap/over_limit")
                    return
                if self.lastmods is not None and self.lastmods.unchanged(url, entry.get("lastmod")):
                    self.crawler.stats.inc_value("incremental/lastmod_skipped")
                    continue
                self.taken += 1
                self.crawler.stats.inc_value("sitemap/urls")
                yield self.record(url, entry, sitemap_url)

    def wanted(self, url: str) -> bool:
        if self.allow and not self.allow.search(url):
            return False
        return not self.deny.search(url)

    def record(self, url: str, entry: dict[str, Any], sitemap_url: str) -> dict[str, Any]:
        if self.discovering:
            return discovered(url, lastmod=entry.get("lastmod", ""))
        fields = {key: entry[key] for key in ("lastmod", "changefreq", "priority") if key in entry}
        return {"url": url, **fields, "sitemap": sitemap_url}
