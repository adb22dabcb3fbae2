"""The built-in `link` spider: Scrapy Cluster's crawl API (maxdepth, domains, regexes, expiry, attrs)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.exceptions import CloseSpider
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from runtime.inputs.patterns import patterns_compile
from runtime.spiders.base import TrawlSpider


@dataclass(frozen=True)
class AllowedHosts:
    """Host names a crawl may follow links to, with their subdomains. Built once per crawl: checked for every link."""

    names: frozenset[str]
    suffixes: tuple[str, ...]

    @classmethod
    def of(cls, domains: list[str]) -> AllowedHosts:
        # A domain written with a port ("shop.test:8080") means its host: ports are not part of a site's identity here.
        names = [domain.lower().rsplit(":", 1)[0] if domain.count(":") == 1 else domain.lower() for domain in domains]
        return cls(frozenset(names), tuple(f".{name}" for name in names))

    def allow(self, url: str) -> bool:
        # By host name, not netloc: Scrapy's url_is_from_any_domain would compare "host:port" with "host".
        host = (urlsplit(url).hostname or "").lower()
        return host in self.names or host.endswith(self.suffixes)


def host_allowed(url: str, domains: list[str]) -> bool:
    return AllowedHosts.of(domains).allow(url)


def parse_cookie(header: str) -> dict[str, str]:
    pairs = (part.split("=", 1) for part in header.split(";") if "=" in part)
    return {name.strip(): value.strip() for name, value in pairs}


class LinkSpider(TrawlSpider):
    """Fetch `url`, yield one item per page, follow links up to `maxdepth` within `allowed_domains`.

    Without `allowed_domains` it stays on the start URL's host: a crawl never wanders the web by default.
    """

    name = "link"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        opts = self.options
        self.maxdepth = int(opts.get("maxdepth", 0))
        self.allowed_domains = list(opts.get("allowed_domains") or [urlsplit(self.start_urls[0]).hostname])
        self.allowed_hosts = AllowedHosts.of(self.allowed_domains)
        self.expires = float(opts.get("expires") or 0)
        self.attrs = dict(opts.get("attrs") or {})
        self.cookies = parse_cookie(opts.get("cookie") or "")
        # Requester regexes run on RE2 (linear time), so not through LinkExtractor's allow/deny, which compiles them
        # with Python's `re`; a pattern RE2 cannot run stops the crawl here, naming the option.
        self.allow = patterns_compile(opts.get("allow_regex"), field="allow_regex")
        self.deny = patterns_compile(opts.get("deny_regex"), field="deny_regex")
        self.links = LinkExtractor(deny_extensions=opts.get("deny_extensions", IGNORED_EXTENSIONS))

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url, cookies=self.cookies, meta={"trawl_depth": 0})

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        self.check_expiry()
        depth = response.meta.get("trawl_depth", 0)
        is_text = isinstance(response, scrapy.http.TextResponse)
        title = (response.css("title::text").get() or "").strip() if is_text else ""
        # `_depth` varies with crawl order, so it is kept out of the change check (leading underscore).
        yield {"url": response.url, "status": response.status, "title": title, "_depth": depth, **self.attrs}
        yield from self.follow(response)

    def check_expiry(self) -> None:
        if self.expires and time.time() > self.expires:
            raise CloseSpider("expired")

    def follow(self, response: scrapy.http.Response) -> Iterator[scrapy.Request]:
        """The page's links to crawl next: within `maxdepth`, the allowed hosts and the requester's patterns."""
        depth = response.meta.get("trawl_depth", 0)
        if depth >= self.maxdepth or not isinstance(response, scrapy.http.TextResponse):
            return
        for link in self.links.extract_links(response):
            if not self.allowed_hosts.allow(link.url) or not self.wanted(link.url):
                continue
            yield scrapy.Request(link.url, cookies=self.cookies, meta={"trawl_depth": depth + 1})

    def wanted(self, url: str) -> bool:
        """LinkExtractor's allow/deny rule: some `allow_regex` matches (if any is set) and no `deny_regex` does."""
        if self.allow and not self.allow.search(url):
            return False
        return not self.deny.search(url)
