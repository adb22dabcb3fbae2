"""Scheduling for real: racing dispatchers, priority overtaking a backlog, discovery and sitemaps on the demo shop.

The first two tests run on a Redis server of their own, so no other worker consumes the messages they count or
queue, and the worker under test starts only once the backlog is waiting.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

import celeryconfig
from crawls.models import CrawlJob, JobStatus
from demo.generate import generate_site
from demo.seed import PRODUCT_FIELDS, demo_scraper_ensure
from demo.serve import DemoServer
from items.models import Item
from project.celery import app
from project.redis.server import redis_start_if_absent
from registry.models import Scraper
from sources.models import Source
from sources.services.sources import source_crawl_now, source_create, sources_dispatch_due
from tests import workers
from tests.workers import BASE_DIR, Worker
from throttling.models import DomainThrottle

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SOURCES = 500
SHOP = {"categories": 2, "products_per_category": 7, "per_page": 3}


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    server = redis_start_if_absent(url, log_path=str(tmp_path_factory.mktemp("private-redis") / "redis.log"))
    yield url
    if server is not None:
        server.terminate()
        server.wait(10)


@pytest.fixture
def broker(private_redis):
    client = redis.Redis.from_url(private_redis)
    client.flushdb()
    yield private_redis
    client.flushdb()
    client.close()


class PrivateWorker(Worker):
    """A worker whose broker is the private Redis. Ready when it says so in its log: a ping would go out through
    this process's producer pool, which is bound to the session's broker."""

    def __init__(self, *, redis_url: str, **kwargs) -> None:
        super().__init__(env={"REDIS_URL": redis_url}, **kwargs)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}:\n{self.log_tail()}")
            if re.search(r" ready\.$", self.log_path.read_text(errors="replace"), re.MULTILINE):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"worker not ready within {timeout}s:\n{self.log_tail()}")


@pytest.fixture
def private_worker(broker, tmp_path):
    workers = []

    def start(**kwargs) -> PrivateWorker:
        worker = PrivateWorker(redis_url=broker, log_dir=tmp_path, **kwargs)
        workers.append(worker)
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()


def probe(redis_url: str, *args: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": workers.test_database_url(),
        "REDIS_URL": redis_url,
        "PYTHONPATH": str(BASE_DIR),
    }
    command = [sys.executable, "-m", "tests.e2e.scheduling_probe", *args]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen(command, cwd=BASE_DIR, env=env, text=True, **pipes)


def probe_report(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.splitlines()[-1])


def probe_jobs(process: subprocess.Popen) -> list[str]:
    return probe_report(process)["jobs"]


def crawl_messages(redis_url: str) -> list[str]:
    """Job ids of the run_crawl messages waiting in the crawl queue, across kombu's priority sub-queues."""
    client = redis.Redis.from_url(redis_url)
    queue, sep = celeryconfig.CRAWL_QUEUE, celeryconfig.broker_transport_options["sep"]
    keys = [queue, *(f"{queue}{sep}{step}" for step in celeryconfig.broker_transport_options["priority_steps"][1:])]
    jobs = []
    for key in keys:
        for raw in client.lrange(key, 0, -1):
            message = json.loads(raw)
            assert message["headers"]["task"] == "crawls.tasks.run_crawl"
            args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
            jobs.append(args[0])
    client.close()
    return jobs


def due_sources(count: int) -> None:
    link = Scraper.objects.get(name="link")
    past = timezone.now() - timedelta(minutes=1)
    Source.objects.bulk_create(
        Source(url=f"http://shop.test/list-{n}.html", scraper=link, next_sync_at=past) for n in range(count)
    )


def assert_each_source_dispatched_once(messages: list[str]) -> None:
    jobs = set(map(str, CrawlJob.objects.values_list("pk", flat=True)))
    assert len(messages) == SOURCES, f"{len(messages)} messages published for {SOURCES} due sources"
    assert set(messages) == jobs and len(jobs) == SOURCES
    per_source = CrawlJob.objects.values_list("source_id", flat=True)
    assert sorted(per_source) == sorted(Source.objects.values_list("pk", flat=True))


def wait_for_log(worker: Worker, pattern: str, count: int, timeout: float = 90) -> list[re.Match]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(re.finditer(pattern, worker.log_path.read_text(errors="replace")))
        if len(found) >= count:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{count} x {pattern!r} not in the worker log:\n{worker.log_tail()}")


# --- Two dispatchers at once ---------------------------------------------------------------------


def test_two_beats_at_once_publish_each_due_source_exactly_once(builtins, broker, private_worker):
    due_sources(SOURCES)
    worker = private_worker(queues=celeryconfig.CONTROL_QUEUE, concurrency=2)

    # The app's transport options (priority steps, separator), or the message lands in a sub-queue nobody reads.
    with app.connection_for_write(broker) as connection:
        for _ in range(2):
            app.send_task("crawls.tasks.dispatch_due_sources", connection=connection)
    runs = wait_for_log(worker, r"dispatch_due_sources\[[^\]]+\] succeeded in [\d.]+s: (\d+)", 2)

    assert sorted(int(run.group(1)) for run in runs) == [0, SOURCES], "one pass holds the lease, the other yields"
    assert_each_source_dispatched_once(crawl_messages(broker))


def test_racing_dispatchers_without_the_lease_still_book_each_source_once(builtins, broker):
    """The lease only saves work: the booking itself (SKIP LOCKED / one SQLite writer) is what guarantees it."""
    due_sources(SOURCES)
    racers = [probe(broker, "dispatch", "--no-lease", "--chunk", "25") for _ in range(2)]
    for racer in racers:  # both set up (Python, Django, the project's imports) before either starts
        assert racer.stdout.readline().strip() == "ready", racer.communicate(timeout=120)
    for racer in racers:
        racer.stdin.write("go\n")
        racer.stdin.flush()
    booked = [probe_report(racer)["published"] for racer in racers]

    assert all(booked), "both dispatchers should have booked some sources, or they did not race"
    assert sum(booked) == SOURCES == CrawlJob.objects.count()
    assert_each_source_dispatched_once(crawl_messages(broker))  # and so no job twice: the two passes' are apart


# --- Priority --------------------------------------------------------------------------------------


def test_an_urgent_job_overtakes_a_queued_backlog(builtins, broker, private_worker, site):
    DomainThrottle.objects.create(domain="127.0.0.1", rate=1000, burst=1000, ip_rate=1000, ip_burst=1000)
    backlog = probe_jobs(probe(broker, "submit", f"{site.url}/product-1.html", "10", "50"))
    (urgent,) = probe_jobs(probe(broker, "submit", f"{site.url}/product-2.html", "90", "1"))
    assert len(crawl_messages(broker)) == 51, "the backlog waits in the broker before any worker runs"

    private_worker(queues=celeryconfig.CRAWL_QUEUE, concurrency=1)  # prefetch 1 (celeryconfig)
    deadline = time.monotonic() + 240
    while CrawlJob.objects.filter(status__in=("queued", "running")).exists() and time.monotonic() < deadline:
        time.sleep(0.5)

    jobs = {str(job.pk): job for job in CrawlJob.objects.all()}
    assert all(job.status == JobStatus.SUCCEEDED for job in jobs.values()), {j.status for j in jobs.values()}
    overtaken = sum(jobs[job_id].started_at > jobs[urgent].started_at for job_id in backlog)
    assert overtaken >= 45, f"the priority-90 job started before only {overtaken} of 50 priority-10 jobs"


# --- Kinds on the demo shop ----------------------------------------------------------------------


@pytest.fixture
def demo_shop(tmp_path):
    with DemoServer(tmp_path / "site") as server:
        generate_site(server.root, server.url, **SHOP)
        yield server


def run_due(job_waiter) -> list[CrawlJob]:
    before = set(CrawlJob.objects.values_list("pk", flat=True))
    sources_dispatch_due()
    jobs = [job_waiter(pk) for pk in CrawlJob.objects.exclude(pk__in=before).values_list("pk", flat=True)]
    assert all(job.status == JobStatus.SUCCEEDED for job in jobs), [(job.url, job.error_message) for job in jobs]
    # A source learns from its job just after the job's end is committed (a follow-up of job_end): wait for it.
    deadline = time.monotonic() + 30
    while Source.objects.filter(last_stats__job__in=[str(job.pk) for job in jobs]).count() < len(jobs):
        assert time.monotonic() < deadline, "sources never got their jobs' feedback"
        time.sleep(0.1)
    return jobs


def test_discovery_on_the_demo_hub_creates_its_list_sources_once(builtins, demo_shop, job_waiter):
    demo_scraper_ensure()
    hub = source_create(url=f"{demo_shop.url}/index.html", scraper="demo_shop", kind="hub", strategy="discovery")

    (first,) = run_due(job_waiter)
    lists = Source.objects.filter(parent=hub).select_related("scraper").order_by("url")

    assert (first.stats["discovered"], first.stats["sources_created"]) == (2, 2)
    assert [(s.url, s.kind, s.strategy, s.scraper.name) for s in lists] == [
        (f"{demo_shop.url}/category/garden/page-1.html", "list", "deep", "demo_shop"),
        (f"{demo_shop.url}/category/kitchen/page-1.html", "list", "deep", "demo_shop"),
    ]
    hub.refresh_from_db()
    assert hub.current_interval == hub.min_interval, "two new sources out of two links is many changes"

    Source.objects.filter(pk=hub.pk).update(next_sync_at=timezone.now())
    again = {job.source_id: job for job in run_due(job_waiter)}  # the hub again, and its two lists for the first time

    assert again[hub.pk].stats["sources_created"] == 0
    assert Source.objects.filter(parent=hub).count() == 2 and Source.objects.count() == 3
    for source in lists:  # each list walked its 3 pages and yielded its 7 products
        assert (again[source.pk].stats["items_new"], again[source.pk].stats["pages"]) == (7, 3 + 7)
    hub.refresh_from_db()
    assert hub.current_interval == int(hub.min_interval * 1.5), "no new sources: the hub is looked at less often"


def test_a_gzipped_sitemap_index_creates_product_sources_without_fetching_them(builtins, demo_shop, job_waiter):
    root = demo_shop.root
    (root / "sitemap-products.xml.gz").write_bytes(gzip.compress((root / "sitemap.xml").read_bytes()))
    (root / "sitemap_index.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{demo_shop.url}/sitemap-products.xml.gz</loc></sitemap></sitemapindex>"
    )
    children = {"scraper": "selectors", "config": {"fields": PRODUCT_FIELDS}}
    sitemap = source_create(url=f"{demo_shop.url}/sitemap_index.xml", kind="sitemap", config={"children": children})

    (job,) = run_due(job_waiter)
    products = Source.objects.filter(parent=sitemap).select_related("scraper")

    assert (job.stats["requests"], job.stats["sources_created"]) == (2, 14), "index + gzipped sitemap, no pages"
    assert {(s.kind, s.scraper.name) for s in products} == {("product", "selectors")}
    one = products.order_by("url").first()
    Source.objects.exclude(pk=one.pk).update(enabled=False)
    Source.objects.filter(pk=sitemap.pk).update(enabled=False)
    (crawled,) = run_due(job_waiter)
    assert (crawled.source_id, crawled.stats["items"]) == (one.pk, 1), "a product source yields its one item"
    assert Item.objects.get(url=one.url).data["sku"] in one.url


def test_crawl_now_runs_a_source_whatever_its_schedule(builtins, site, job_waiter):
    config = {"item_links": "a.product", "next_page": "a.next", "fields": {"title": "h1::text"}}
    source = source_create(url=f"{site.url}/list-1.html", scraper="selectors", config=config)
    Source.objects.filter(pk=source.pk).update(next_sync_at=timezone.now() + timedelta(days=1))

    job = job_waiter(source_crawl_now(source=source).pk)

    source.refresh_from_db()
    assert (job.status, job.stats["items_new"]) == ("succeeded", 12)
    assert source.last_stats["job"] == str(job.pk) and source.current_interval == source.min_interval
    assert source.next_sync_at == job.finished_at + timedelta(seconds=source.min_interval)
