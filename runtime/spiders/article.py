"""The built-in `article` spider: each page's main text as Markdown, without navigation, sidebars or footers.

An item is `{url, title, published, lang, markdown, sections}` (runtime.extraction.markdown): `sections` maps each
heading to its section's Markdown, so a re-crawl's field history names only the sections that moved. It follows
links like `link` (the same crawl API options: `maxdepth`, `allowed_domains`, regexes, `expires`, `attrs`).

trafilatura takes about 1.5 s per MB of HTML, so it never runs on the reactor: pages are extracted in a small thread
pool shared by the process's crawls, and a page above TRAWL_ARTICLE_HTML_MAX_BYTES is not extracted at all (stat
`article/too_large`, logged; no item). Markdown is kept to whole sections within TRAWL_ARTICLE_MARKDOWN_MAX_BYTES
(stat `article/truncated`; the item says `_truncated`).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import scrapy

from runtime.extraction.markdown import article_from_html
from runtime.spiders.link import LinkSpider

# Threads per worker process: extraction is CPU work holding the GIL most of the time, so more threads than cores
# only queue; pages wait in Scrapy's scraper slot meanwhile (its size bound holds them back from downloading more).
EXTRACTION_THREADS = 2


@functools.cache
def extraction_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=EXTRACTION_THREADS, thread_name_prefix="trawl-article")


class ArticleSpider(LinkSpider):
    name = "article"
    html_max: int  # TRAWL_ARTICLE_HTML_MAX_BYTES
    markdown_max: int  # TRAWL_ARTICLE_MARKDOWN_MAX_BYTES

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> ArticleSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.html_max = crawler.settings.getint("TRAWL_ARTICLE_HTML_MAX_BYTES")
        spider.markdown_max = crawler.settings.getint("TRAWL_ARTICLE_MARKDOWN_MAX_BYTES")
        return spider

    async def parse(self, response: scrapy.http.Response) -> AsyncIterator[Any]:
        self.check_expiry()
        item = await self.article(response)
        if item is not None:
            yield item
        for request in self.follow(response):
            yield request

    async def article(self, response: scrapy.http.Response) -> dict[str, Any] | None:
        if not isinstance(response, scrapy.http.TextResponse):
            return None
        stats = self.crawler.stats
        if len(response.body) > self.html_max:
            stats.inc_value("article/too_large")
            self.logger.warning(
                "%s: %d bytes of HTML, above TRAWL_ARTICLE_HTML_MAX_BYTES (%d): not extracted",
                response.url,
                len(response.body),
                self.html_max,
            )
            return None
        extract = functools.partial(article_from_html, response.text, url=response.url, markdown_max=self.markdown_max)
        started = time.monotonic()
        article = await asyncio.get_running_loop().run_in_executor(extraction_pool(), extract)
        stats.inc_value("article/seconds", round(time.monotonic() - started, 3))
        stats.inc_value("article/pages")
        if article.pop("_truncated", False):
            stats.inc_value("article/truncated")
            article["_truncated"] = True
        if not article["markdown"]:
            stats.inc_value("article/empty")
        title = article["title"] or (response.css("title::text").get() or "").strip() or None
        return {"url": response.url, **article, "title": title, "lang": page_language(response), **self.attrs}


def page_language(response: scrapy.http.TextResponse) -> str | None:
    """The language the page declares: `<html lang>`, else a Content-Language header or meta."""
    declared = (
        response.xpath("/html/@lang").get()
        or (response.headers.get("Content-Language") or b"").decode("latin-1")
        or response.xpath("//meta[@http-equiv='content-language' or @http-equiv='Content-Language']/@content").get()
    )
    return declared.strip() or None if declared else None
