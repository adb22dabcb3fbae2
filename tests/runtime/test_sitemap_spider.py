"""The built-in `sitemap` spider on hand-made responses: urlsets, indexes, gzip, robots.txt, filters. No network."""

from __future__ import annotations

import gzip

import pytest
import scrapy
from scrapy.http import Response, TextResponse, XmlResponse
from scrapy.utils.test import get_crawler

from runtime.spiders.discovery import is_discovered
from runtime.spiders.sitemap import SitemapSpider

BASE = "http://shop.test"
URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:xhtml="http://www.w3.org/1999/xhtml">
  <url><loc>http://shop.test/product/A-1.html</loc><lastmod>2026-01-02</lastmod>
    <xhtml:link rel="alternate" hreflang="de" href="http://shop.test/de/product/A-1.html"/></url>
  <url><loc>http://shop.test/product/A-2.html</loc><changefreq>daily</changefreq><priority>0.8</priority></url>
  <url><loc>http://shop.test/about.html</loc></url>
</urlset>"""
INDEX = b"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>http://shop.test/sitemaps/products-1.xml.gz</loc></sitemap>
  <sitemap><loc>http://shop.test/sitemaps/pages.xml</loc></sitemap>
</sitemapindex>"""


def spider(strategy: str = "discovery", **config) -> SitemapSpider:
    crawler = get_crawler(SitemapSpider, {"DOWNLOAD_MAXSIZE": 1_000_000})
    return SitemapSpider.from_crawler(crawler, url=f"{BASE}/sitemap.xml", config=config, strategy=strategy)


def parse(spider: SitemapSpider, response: Response) -> list:
    return list(spider.parse(response))


def xml(url: str, body: bytes) -> XmlResponse:
    return XmlResponse(url=url, body=body)


def test_a_discovery_job_reports_every_url_as_a_source_without_fetching_it():
    out = parse(spider(), xml(f"{BASE}/sitemap.xml", URLSET))

    assert all(is_discovered(record) for record in out)
    assert [record["url"] for record in out] == [
        f"{BASE}/product/A-1.html",
        f"{BASE}/product/A-2.html",
        f"{BASE}/about.html",
    ]
    assert out[0]["lastmod"] == "2026-01-02"


def test_a_deep_job_yields_one_item_per_url():
    out = parse(spider("deep"), xml(f"{BASE}/sitemap.xml", URLSET))

    assert out[1] == {
        "url": f"{BASE}/product/A-2.html",
        "changefreq": "daily",
        "priority": "0.8",
        "sitemap": f"{BASE}/sitemap.xml",
    }


def test_allow_and_deny_patterns_filter_urls_and_alternates_are_opt_in():
    crawl = spider(allow=["/product/"], deny=["A-2"], alternate=True)

    out = parse(crawl, xml(f"{BASE}/sitemap.xml", URLSET))

    assert [record["url"] for record in out] == [f"{BASE}/product/A-1.html", f"{BASE}/de/product/A-1.html"]
    assert crawl.crawler.stats.get_value("sitemap/filtered") == 2


def test_an_index_is_followed_child_by_child_and_follow_narrows_it():
    everything = parse(spider(), xml(f"{BASE}/sitemap_index.xml", INDEX))
    products = parse(spider(follow=["products"]), xml(f"{BASE}/sitemap_index.xml", INDEX))

    assert all(isinstance(request, scrapy.Request) for request in everything)
    assert [request.url for request in everything] == [
        f"{BASE}/sitemaps/products-1.xml.gz",
        f"{BASE}/sitemaps/pages.xml",
    ]
    assert [request.url for request in products] == [f"{BASE}/sitemaps/products-1.xml.gz"]


def test_a_gzipped_sitemap_is_read():
    response = Response(url=f"{BASE}/sitemaps/products-1.xml.gz", body=gzip.compress(URLSET))

    out = parse(spider(), response)

    assert len(out) == 3


def test_robots_txt_leads_to_its_sitemaps():
    robots = b"User-agent: *\nDisallow: /private/\nSitemap: http://shop.test/sitemap_index.xml\nSitemap: /extra.xml\n"

    out = parse(spider(), TextResponse(url=f"{BASE}/robots.txt", body=robots))

    assert [request.url for request in out] == [f"{BASE}/sitemap_index.xml", f"{BASE}/extra.xml"]


def test_max_urls_caps_what_one_job_reports():
    assert len(parse(spider(max_urls=2), xml(f"{BASE}/sitemap.xml", URLSET))) == 2


@pytest.mark.parametrize(
    "response",
    [
        TextResponse(url=f"{BASE}/index.html", body=b"<html><body>not a sitemap</body></html>"),
        Response(url=f"{BASE}/broken.xml.gz", body=b"\x1f\x8b\x08broken"),
        xml(f"{BASE}/feed.xml", b"<rss><channel><item/></channel></rss>"),
    ],
)
def test_what_is_not_a_sitemap_yields_nothing_and_is_counted(response):
    crawl = spider()

    assert parse(crawl, response) == []
    assert crawl.crawler.stats.get_value("sitemap/invalid") == 1


def test_a_stored_max_urls_over_the_cap_is_capped_when_the_spider_starts():
    """A job stored before the submission check (or written to the database): TRAWL_SITEMAP_MAX_URLS still holds."""
    crawler = get_crawler(SitemapSpider, {"DOWNLOAD_MAXSIZE": 1_000_000, "TRAWL_SITEMAP_MAX_URLS": 2})
    capped = SitemapSpider.from_crawler(crawler, url=f"{BASE}/sitemap.xml", config={"max_urls": 10**12})

    assert capped.max_urls == 2
    assert len(parse(capped, xml(f"{BASE}/sitemap.xml", URLSET))) == 2
    assert spider(max_urls="lots").max_urls == 50_000  # not a count: the protocol's most
