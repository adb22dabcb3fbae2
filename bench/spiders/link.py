"""Plain Scrapy twin of Trawl's built-in `link` spider, for `scrapy runspider`: the baseline of bench/crawl.py.

Same crawl logic (one item per page, follow links on the start host up to `maxdepth`), no Trawl code. `url` may name
several sites, comma-separated: one spider then crawls them all at once, each page's links followed on its own host
(Scrapy's way of crawling many domains: bench/density.py).
`-a stats_path=FILE` writes Scrapy's final stats there as JSON when the spider closes; `-a render=1` asks
scrapy-playwright to render every request (`meta={"playwright": True}`: the baseline of bench/render.py).
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import scrapy
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor


class LinkSpider(scrapy.Spider):
    name = "bench_link"

    def __init__(self, url: str, maxdepth: str = "0", stats_path: str = "", render: str = "", **kwargs) -> None:
        # The crawl starts here, when the crawler creates its spider (as for Trawl, whose clock runs from the claim):
        # interpreter start and imports are not counted.
        self.wall_at_init, self.cpu_at_init = time.monotonic(), time.process_time()
        super().__init__(**kwargs)
        self.start_urls = url.split(",")
        self.maxdepth = int(maxdepth)
        # As Trawl's spider sets it (its start host), so the offsite middleware does the same work.
        self.allowed_domains = sorted({urlsplit(start).hostname for start in self.start_urls})
        self.stats_path = stats_path
        self.links = LinkExtractor(deny_extensions=IGNORED_EXTENSIONS)
        self.meta = {"playwright": True} if render else {}

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url, meta={"trawl_depth": 0, **self.meta})

    def parse(self, response):
        depth = response.meta.get("trawl_depth", 0)
        is_text = isinstance(response, scrapy.http.TextResponse)
        title = (response.css("title::text").get() or "").strip() if is_text else ""
        yield {"url": response.url, "status": response.status, "title": title, "depth": depth}
        if depth >= self.maxdepth or not is_text:
            return
        own = urlsplit(response.url).hostname
        for link in self.links.extract_links(response):
            host = (urlsplit(link.url).hostname or "").lower()
            if host == own or host.endswith(f".{own}"):
                yield scrapy.Request(link.url, meta={"trawl_depth": depth + 1, **self.meta})

    def closed(self, reason: str) -> None:
        if not self.stats_path:
            return
        stats = dict(self.crawler.stats.get_stats())
        stats["bench/crawl_seconds"] = time.monotonic() - self.wall_at_init
        stats["bench/crawl_cpu_seconds"] = time.process_time() - self.cpu_at_init
        stats["bench/monotonic_span"] = [self.wall_at_init, time.monotonic()]  # one clock for every process here
        with open(self.stats_path, "w") as out:
            json.dump(stats, out, default=str)
