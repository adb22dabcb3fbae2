"""Incremental re-crawls end to end: a real worker re-crawls two sources of a site that sends validators.

The site answers with ETag and Last-Modified, honours If-None-Match / If-Modified-Since with 304, lists its products
in a sitemap with lastmod, and counts the bytes it sends. A re-crawl of the unchanged site must cost under a tenth of
the first crawl's bytes and see every item unchanged; a page that changed must be fetched again and seen changed.
"""

from __future__ import annotations

import hashlib
import threading
import time
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler

import pytest

from crawls.models import CrawlJob
from project.redis import get_redis, redis_key
from sources.services.sources import source_crawl_now, source_create
from tests.sites import ServedSite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PRODUCTS, PER_PAGE = 24, 8
FILLER = "<p>" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 60 + "</p>"  # ~3.5 KB per page
FIELDS = {"title": "h1::text", "price": ".price::text"}


class ValidatingSite(ServedSite):
    """A shop whose pages carry ETag and Last-Modified and which answers 304 when they still hold."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[bytes, float, str]] = {}  # path -> (body, last modified, content type)
        self.sent = 0
        self.statuses: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        for n in range(1, PRODUCTS + 1):
            self.set_page(f"/product-{n}.html", self.product(n, price=f"{10 + n}.00"), modified=1_700_000_000 + n)
        for page in range(1, PRODUCTS // PER_PAGE + 1):
            numbers = range((page - 1) * PER_PAGE + 1, page * PER_PAGE + 1)
            links = "".join(f'<a class="product" href="/product-{n}.html">{n}</a> ' for n in numbers)
            more = f'<a class="next" href="/list-{page + 1}.html">next</a>' if page < PRODUCTS // PER_PAGE else ""
            body = f"<html><body>{links}{more}{FILLER}</body></html>"
            self.set_page(f"/list-{page}.html", body, modified=1_700_000_000)
        self.set_page("/robots.txt", "User-agent: *\nDisallow:\n", modified=1_700_000_000, kind="text/plain")
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.serve(self)

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    @staticmethod
    def product(n: int, *, price: str) -> str:
        return f'<html><body><h1>Product {n}</h1><span class="price">{price}</span>{FILLER}</body></html>'

    def set_page(self, path: str, body: str, *, modified: float, kind: str = "text/html") -> None:
        with self.lock:
            self.pages[path] = (body.encode(), modified, kind)

    def sitemap(self) -> None:
        entries = "".join(
            f"<url><loc>{self.url}{path}</loc><lastmod>{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(mod))}"
            "</lastmod></url>"
            for path, (_, mod, _) in sorted(self.pages.items())
            if path.startswith("/product-")
        )
        body = f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        modified = max(mod for _, mod, _ in self.pages.values())
        self.set_page("/sitemap.xml", body, modified=modified, kind="application/xml")

    def serve(self, handler: BaseHTTPRequestHandler) -> None:
        with self.lock:
            found = self.pages.get(handler.path)
        if found is None:
            handler.send_error(404)
            return
        body, modified, kind = found
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        since = handler.headers.get("If-Modified-Since")
        unchanged = handler.headers.get("If-None-Match") == etag or (
            since is not None
            and handler.headers.get("If-None-Match") is None
            and parsedate_to_datetime(since).timestamp() >= int(modified)
        )
        status = 304 if unchanged else 200
        handler.send_response(status)
        handler.send_header("ETag", etag)
        handler.send_header("Last-Modified", formatdate(modified, usegmt=True))
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", "0" if unchanged else str(len(body)))
        handler.end_headers()
        if not unchanged:
            handler.wfile.write(body)
        with self.lock:
            # Pages only: robots.txt is read once per period for every crawl of the site (throttling/robots_shared.py).
            self.sent += 0 if unchanged or handler.path == "/robots.txt" else len(body)
            self.statuses.append((handler.path, status))

    def take_counts(self) -> tuple[int, list[tuple[str, int]]]:
        with self.lock:
            sent, statuses = self.sent, self.statuses
            self.sent, self.statuses = 0, []
        return sent, statuses

    def __enter__(self) -> ValidatingSite:
        super().__enter__()
        self.sitemap()
        return self


@pytest.fixture
def shop():
    with ValidatingSite() as site:
        yield site
    client = get_redis()
    for key in client.scan_iter(redis_key("incremental", "*"), count=1000):
        client.delete(key)


def crawl(sources, job_waiter) -> list[CrawlJob]:
    jobs = [job_waiter(source_crawl_now(source=source).pk, timeout=120) for source in sources]
    assert [job.status for job in jobs] == ["succeeded"] * len(jobs), [job.error_message for job in jobs]
    return jobs


def test_a_recrawl_of_an_unchanged_site_costs_a_tenth_and_sees_a_changed_page(builtins, shop, job_waiter):
    listing = source_create(
        url=f"{shop.url}/list-1.html",
        scraper="selectors",
        config={"item_links": "a.product", "next_page": "a.next", "fields": FIELDS},
    )
    sitemap = source_create(url=f"{shop.url}/sitemap.xml", kind="sitemap", strategy="deep")
    sources = [listing, sitemap]

    first = crawl(sources, job_waiter)
    first_bytes, _ = shop.take_counts()
    assert first[0].stats["items_new"] == PRODUCTS and first[1].stats["items_new"] == PRODUCTS

    again = crawl(sources, job_waiter)
    again_bytes, statuses = shop.take_counts()
    print(f"first run {first_bytes} bytes, unchanged re-crawl {again_bytes} bytes")
    assert again_bytes < 0.1 * first_bytes
    # The jobs' own `bytes` (what came over the wire, headers aside) say the same.
    assert sum(job.stats["bytes"] for job in again) < 0.1 * sum(job.stats["bytes"] for job in first)
    listed = again[0].stats
    assert (listed["items_unchanged"], listed["items_new"], listed["items_changed"]) == (PRODUCTS, 0, 0)
    assert listed["incremental"]["fetches_avoided"] >= PRODUCTS + 3
    assert listed["incremental"]["bytes_avoided"] > 0.9 * first_bytes / 2
    assert again[1].stats["incremental"]["lastmod_skipped"] == PRODUCTS
    assert all(status == 304 for _, status in statuses), statuses

    shop.set_page("/product-5.html", shop.product(5, price="99.00"), modified=1_800_000_000)
    shop.sitemap()
    changed = crawl(sources, job_waiter)
    _, statuses = shop.take_counts()
    assert ("/product-5.html", 200) in statuses
    assert (changed[0].stats["items_changed"], changed[0].stats["items_unchanged"]) == (1, PRODUCTS - 1)
    assert changed[1].stats["items_new"] + changed[1].stats["items_changed"] == 1, "the sitemap lists it once more"
    assert changed[1].stats["incremental"]["lastmod_skipped"] == PRODUCTS - 1


def test_a_scraper_may_opt_out(builtins, shop, job_waiter):
    listing = source_create(
        url=f"{shop.url}/list-1.html",
        scraper="selectors",
        config={"item_links": "a.product", "next_page": "a.next", "fields": FIELDS, "TRAWL_INCREMENTAL": False},
    )
    crawl([listing], job_waiter)
    first_bytes, _ = shop.take_counts()
    (again,) = crawl([listing], job_waiter)
    again_bytes, statuses = shop.take_counts()

    assert again_bytes == first_bytes and all(status == 200 for _, status in statuses)
    assert again.stats["items_unchanged"] == PRODUCTS and not again.stats["incremental"]


def test_a_rendered_sources_unchanged_pages_are_not_rendered_again(builtins, shop, job_waiter):
    listing = source_create(
        url=f"{shop.url}/list-1.html",
        scraper="selectors",
        config={"item_links": "a.product", "next_page": "a.next", "fields": FIELDS, "TRAWL_RENDER": "always"},
    )
    (first,) = crawl([listing], job_waiter)
    shop.take_counts()
    (again,) = crawl([listing], job_waiter)
    _, statuses = shop.take_counts()

    pages = PRODUCTS + PRODUCTS // PER_PAGE
    assert first.stats["render"]["pages"] == pages and first.stats["items_new"] == PRODUCTS
    assert all(status == 304 for _, status in statuses), statuses
    assert again.stats["render"]["pages"] == 0 and again.stats["render"]["not_modified"] == pages
    assert again.stats["items_unchanged"] == PRODUCTS  # the stored rendered pages still lead to every item

    shop.set_page("/product-5.html", shop.product(5, price="99.00"), modified=1_800_000_000)
    (changed,) = crawl([listing], job_waiter)
    assert changed.stats["render"]["pages"] == 1 and changed.stats["items_changed"] == 1
