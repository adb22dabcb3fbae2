"""Sources: dispatching the due ones (lease, booking, windows), learning from jobs, discovery, crawl now, checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import scrapy
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawls.models import CrawlJob, JobStatus
from crawls.publish import RUN_CRAWL
from crawls.scraping.discovery import discovered
from crawls.scraping.retry_after import RETRY_AFTER_STAT, RetryAfterStats
from crawls.services import job_claim
from crawls.services.ingestion import ItemIngest
from crawls.services.lifecycle import job_end
from project.errors import TrawlError
from project.lease import Lease
from project.redis import get_redis, redis_key
from registry.models import Scraper
from sources.models import Source
from sources.scheduling import Window
from sources.services.children import source_crawl_extras, sources_discover
from sources.services.sources import (
    DISPATCH_LEASE,
    source_crawl_now,
    source_create,
    source_update,
    sources_dispatch_due,
)


@pytest.fixture(autouse=True)
def free_lease(redis_server, db):  # the key is named after the installation, whose id is in the database
    # A dispatcher killed mid-pass in an earlier run would hold the lease for up to a minute.
    get_redis().delete(redis_key("lease", DISPATCH_LEASE))


@pytest.fixture
def link(builtins):
    return Scraper.objects.get(name="link")


def make_source(scraper, n, **fields):
    return Source.objects.create(url=f"http://shop.test/list-{n}.html", scraper=scraper, **fields)


def finish(job: CrawlJob, *, error_class: str = "", **stats) -> CrawlJob:
    claimed = job_claim(job_id=job.pk, attempt=job.attempt, worker="test")
    with TestCase.captureOnCommitCallbacks(execute=True):  # the source learns once the job's end is committed
        return job_end(job=claimed, error_class=error_class, stats=stats)


# --- Dispatch ------------------------------------------------------------------------------------


def dispatch(**kwargs) -> list[CrawlJob]:
    """One dispatch pass; the jobs it created (the pass itself returns their count)."""
    before = set(CrawlJob.objects.values_list("pk", flat=True))
    published = sources_dispatch_due(**kwargs)
    jobs = list(CrawlJob.objects.exclude(pk__in=before))
    assert len(jobs) == published
    return jobs


def test_due_sources_are_booked_and_get_one_job_each(link):
    now = timezone.now()
    due = [make_source(link, n, next_sync_at=now - timedelta(seconds=1), current_interval=600) for n in range(3)]
    later = make_source(link, 9, next_sync_at=now + timedelta(hours=1))
    disabled = make_source(link, 10, next_sync_at=now, enabled=False)

    jobs = dispatch(now=now)

    assert sorted(job.source_id for job in jobs) == sorted(source.pk for source in due)
    for source in due:
        source.refresh_from_db()
        assert source.next_sync_at == now + timedelta(seconds=600)
    assert not CrawlJob.objects.filter(source__in=[later, disabled]).exists()


def test_source_with_a_job_still_active_is_not_dispatched_again(link):
    now = timezone.now()
    source = make_source(link, 1, next_sync_at=now)
    (first,) = dispatch(now=now)

    assert dispatch(now=now + timedelta(hours=2)) == []
    CrawlJob.objects.filter(pk=first.pk).update(status=JobStatus.SUCCEEDED)
    assert [job.source_id for job in dispatch(now=now + timedelta(hours=2))] == [source.pk]


def test_jobs_carry_the_sources_url_scraper_and_priority_and_are_published_on_commit(
    link, sent_tasks, django_capture_on_commit_callbacks
):
    source = make_source(link, 1, priority=90)

    with django_capture_on_commit_callbacks(execute=True):
        (job,) = dispatch()

    assert (job.url, job.scraper_id, job.priority, job.status) == (source.url, link.pk, 90, JobStatus.QUEUED)
    assert sent_tasks.args_of(RUN_CRAWL) == [(str(job.pk), 1)]


def test_a_second_dispatcher_does_nothing_while_the_lease_is_held(link):
    make_source(link, 1)
    other = Lease(DISPATCH_LEASE, seconds=60)
    assert other.acquire()

    assert dispatch() == []
    assert not CrawlJob.objects.exists()
    other.release()
    assert sources_dispatch_due() == 1
    assert other.holder() is None, "a pass releases its lease"


def test_a_pass_books_in_chunks_and_stops_at_its_limit(link, settings):
    settings.TRAWL_SCHEDULING_DISPATCH_CHUNK = 3
    settings.TRAWL_SCHEDULING_DISPATCH_MAX = 8
    now = timezone.now()
    for n in range(10):
        make_source(link, n, next_sync_at=now - timedelta(minutes=1), priority=10 + n)

    first = dispatch(now=now)
    second = dispatch(now=now)

    assert len(first) == 8 and len(second) == 2
    assert sorted(job.priority for job in second) == [10, 11], "the most urgent sources go first"
    assert CrawlJob.objects.count() == Source.objects.count() == 10


def test_due_sources_whose_jobs_still_run_do_not_hold_back_the_rest(link, settings):
    settings.TRAWL_SCHEDULING_DISPATCH_CHUNK = 2
    now = timezone.now()
    busy = [make_source(link, n, next_sync_at=now - timedelta(minutes=1), priority=90) for n in range(5)]
    free = [make_source(link, 10 + n, next_sync_at=now - timedelta(seconds=10), priority=10) for n in range(3)]
    dispatch(now=now - timedelta(seconds=30))  # the most urgent five got their jobs, which are still queued...
    Source.objects.filter(pk__in=[source.pk for source in busy]).update(next_sync_at=now - timedelta(seconds=1))

    jobs = dispatch(now=now)  # ...and they are due again, first in the pass's order, ahead of every free source

    assert sorted(job.source_id for job in jobs) == sorted(source.pk for source in free)
    assert Source.objects.filter(pk__in=[source.pk for source in busy], next_sync_at__lte=now).count() == 5


def test_very_many_busy_sources_are_left_out_by_a_subquery_instead_of_their_ids(link, settings, monkeypatch):
    monkeypatch.setattr("sources.services.dispatch.BUSY_LISTED_MAX", 2)
    now = timezone.now()
    busy = [make_source(link, n, next_sync_at=now - timedelta(minutes=1), priority=90) for n in range(3)]
    free = make_source(link, 10, next_sync_at=now - timedelta(seconds=10), priority=10)
    dispatch(now=now - timedelta(seconds=30))
    Source.objects.filter(pk__in=[source.pk for source in busy]).update(next_sync_at=now - timedelta(seconds=1))

    assert [job.source_id for job in dispatch(now=now)] == [free.pk]


def test_query_count_does_not_grow_with_sources_that_are_not_due(link):
    def queries_for_one_pass(not_due: int) -> int:
        now = timezone.now()
        Source.objects.bulk_create(
            Source(url=f"http://idle.test/{not_due}/{n}", scraper=link, next_sync_at=now + timedelta(hours=1))
            for n in range(not_due)
        )
        make_source(link, not_due, next_sync_at=now)
        with CaptureQueriesContext(connection) as queries:
            assert sources_dispatch_due(now=now) == 1
        return len(queries)

    assert queries_for_one_pass(10) == queries_for_one_pass(2000)


def test_a_source_outside_its_window_waits_for_it_without_a_job(link):
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)  # 14:00 in Paris
    night = make_source(link, 1, next_sync_at=now, window_start_hour=22, window_end_hour=6, timezone="Europe/Paris")
    day = make_source(link, 2, next_sync_at=now, window_start_hour=9, window_end_hour=17, timezone="Europe/Paris")

    jobs = dispatch(now=now)

    night.refresh_from_db()
    assert [job.source_id for job in jobs] == [day.pk]
    assert night.next_sync_at == datetime(2026, 6, 1, 20, tzinfo=UTC)  # 22:00 Paris
    assert "crawl window" in night.schedule_note
    assert dispatch(now=now + timedelta(hours=7)) == []
    assert [job.source_id for job in dispatch(now=now + timedelta(hours=8))] == [night.pk]


def test_a_scraper_may_set_the_window_of_its_sources(link):
    link.settings = {"TRAWL_CRAWL_WINDOW": {"start_hour": 1, "end_hour": 5, "timezone": "UTC"}}
    link.save()
    source = make_source(link, 1, next_sync_at=datetime(2026, 6, 1, 12, tzinfo=UTC))

    assert dispatch(now=datetime(2026, 6, 1, 12, tzinfo=UTC)) == []
    source.refresh_from_db()
    assert source.next_sync_at == datetime(2026, 6, 2, 1, tzinfo=UTC)


# --- Feedback from jobs --------------------------------------------------------------------------


@pytest.fixture
def dispatched(link):
    source = make_source(link, 1, refresh_interval=3600, current_interval=3600, min_interval=600, max_interval=86400)
    (job,) = dispatch()
    return source, job


def test_an_unchanged_run_stretches_the_interval_and_books_the_next_run(dispatched):
    source, job = dispatched

    finished = finish(job, items=12, items_unchanged=12)

    source.refresh_from_db()
    assert (source.current_interval, source.consecutive_failures) == (5400, 0)
    assert source.next_sync_at == finished.finished_at + timedelta(seconds=5400)
    assert source.last_run_at == finished.finished_at
    assert source.last_stats["job"] == str(job.pk) and source.last_stats["status"] == "succeeded"
    assert "no change" in source.schedule_note


def test_many_changes_bring_the_source_back_to_its_minimum(dispatched):
    source, job = dispatched

    finish(job, items=12, items_new=2, items_changed=4, items_unchanged=6)

    source.refresh_from_db()
    assert source.current_interval == 600


def test_network_errors_back_off_and_a_success_resets(dispatched, link):
    source, job = dispatched
    delays = []
    for error_class in ("dns", "connection", "blocked", ""):
        finished = finish(job, error_class=error_class)
        source.refresh_from_db()
        delays.append((source.consecutive_failures, (source.next_sync_at - finished.finished_at).total_seconds()))
        job = source_crawl_now(source=source)

    assert delays == [(1, 3600), (2, 4 * 3600), (3, 24 * 3600), (0, 5400)]


def test_a_longer_retry_after_from_the_site_is_honoured(dispatched):
    source, job = dispatched

    finished = finish(job, error_class="blocked", retry_after=5 * 3600)

    source.refresh_from_db()
    assert source.next_sync_at == finished.finished_at + timedelta(hours=5)


def test_the_next_run_waits_for_the_window(link):
    opens = (timezone.now().hour + 3) % 24  # an hour-long window that is surely shut 15 minutes from now
    window = {"window_start_hour": opens, "window_end_hour": (opens + 1) % 24, "timezone": "UTC"}
    source = make_source(link, 1, current_interval=600, **window)
    job = source_crawl_now(source=source)

    finished = finish(job, items=1, items_unchanged=1)

    source.refresh_from_db()
    wanted = Window(opens, (opens + 1) % 24).next_open(finished.finished_at + timedelta(seconds=900))
    assert source.next_sync_at == wanted and wanted.hour == opens
    assert "crawl window" in source.schedule_note


# --- Crawl now ---------------------------------------------------------------------------------


def test_crawl_now_queues_a_job_and_books_the_source(link):
    source = make_source(link, 1, next_sync_at=timezone.now() - timedelta(hours=1), current_interval=600)

    job = source_crawl_now(source=source)

    source.refresh_from_db()
    assert (job.source_id, job.status) == (source.pk, JobStatus.QUEUED)
    assert source.next_sync_at > timezone.now() + timedelta(seconds=590), "a dispatcher must pass it by"
    assert dispatch(now=timezone.now() + timedelta(hours=2)) == []
    with pytest.raises(TrawlError) as refused:
        source_crawl_now(source=source)
    assert refused.value.status_code == 409


# --- Creating and changing sources -------------------------------------------------------------


def test_a_sitemap_source_gets_the_sitemap_scraper_and_discovery_by_default(builtins):
    source = source_create(url="http://shop.test/sitemap.xml", kind="sitemap")

    assert (source.scraper.name, source.strategy, source.current_interval) == ("sitemap", "discovery", 3600)
    assert source.next_sync_at <= timezone.now()


def test_bounds_follow_a_refresh_interval_outside_the_defaults(builtins):
    source = source_create(url="http://shop.test/", refresh_interval=120)

    assert (source.min_interval, source.refresh_interval, source.max_interval) == (120, 120, 86400)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"window_start_hour": 22}, "window_end_hour"),
        ({"window_start_hour": 5, "window_end_hour": 5}, "window_end_hour"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"min_interval": 7200, "refresh_interval": 3600}, "refresh_interval"),
        ({"min_interval": 5, "refresh_interval": 60}, "min_interval"),
        ({"config": {"children": {"scraper": "nope"}}}, "scraper"),
        ({"url": "ftp://shop.test/"}, "url"),
    ],
)
def test_bad_sources_are_refused_naming_the_field(builtins, fields, field):
    with pytest.raises(TrawlError) as refused:
        source_create(**{"url": "http://shop.test/", **fields})

    assert refused.value.field == field
    assert not Source.objects.exists()


def test_the_same_url_twice_for_one_scraper_is_refused(builtins):
    source_create(url="http://shop.test/")

    with pytest.raises(TrawlError, match="already has a source"):
        source_create(url="http://shop.test/")


def test_a_new_refresh_interval_restarts_the_adaptation(builtins):
    source = source_create(url="http://shop.test/", refresh_interval=3600)
    Source.objects.filter(pk=source.pk).update(current_interval=20_000)

    updated = source_update(source=source, refresh_interval=1800)
    kept = source_update(source=updated, priority=80)

    assert updated.current_interval == 1800
    assert (kept.current_interval, kept.priority) == (1800, 80)


# --- Discovery ---------------------------------------------------------------------------------


@pytest.fixture
def hub(builtins):
    Scraper.objects.create(name="demo")
    config = {"cookies": {"lang": "en"}}
    url = "http://shop.test/index.html"
    return source_create(url=url, scraper="demo", kind="hub", strategy="discovery", config=config)


def hub_job(hub) -> CrawlJob:
    return CrawlJob.objects.create(url=hub.url, scraper=hub.scraper, source=hub)


def test_a_hub_creates_list_sources_that_inherit_its_scraper_and_config(hub):
    records = [discovered(f"http://shop.test/category/{name}/page-1.html#top") for name in ("kitchen", "garden")]

    created = sources_discover(job=hub_job(hub), records=records)

    children = Source.objects.filter(parent=hub).order_by("url")
    assert created == 2
    assert [child.url for child in children] == [
        "http://shop.test/category/garden/page-1.html",
        "http://shop.test/category/kitchen/page-1.html",
    ]
    assert {(c.kind, c.strategy, c.scraper.name, c.priority) for c in children} == {("list", "deep", "demo", 50)}
    assert all(child.config == {"cookies": {"lang": "en"}} for child in children)
    assert all(child.next_sync_at <= timezone.now() for child in children), "new sources are due at once"


def test_discovery_is_deduplicated_across_runs_and_stays_on_the_site(hub):
    records = [discovered("http://shop.test/a"), discovered("http://shop.test/a"), discovered("http://evil.test/x")]

    first = sources_discover(job=hub_job(hub), records=records)
    second = sources_discover(job=hub_job(hub), records=[*records, discovered("http://shop.test/b")])

    assert (first, second) == (1, 1)
    assert sorted(Source.objects.filter(parent=hub).values_list("url", flat=True)) == [
        "http://shop.test/a",
        "http://shop.test/b",
    ]


def test_children_spec_picks_their_scraper_config_and_kind(hub):
    hub.config = {"children": {"scraper": "selectors", "config": {"fields": {"t": "h1"}}, "kind": "product"}}
    hub.save()
    records = [discovered("http://shop.test/p/1"), discovered("http://shop.test/h", kind="hub")]

    sources_discover(job=hub_job(hub), records=records)

    children = {c.url: c for c in Source.objects.filter(parent=hub).select_related("scraper")}
    product, sub_hub = children["http://shop.test/p/1"], children["http://shop.test/h"]
    assert (product.kind, product.scraper.name, product.config) == ("product", "selectors", {"fields": {"t": "h1"}})
    assert (sub_hub.kind, sub_hub.strategy) == ("hub", "discovery"), "a hub a hub finds goes on discovering"


def test_a_deep_source_never_creates_sources(hub):
    hub.strategy = "deep"
    hub.save()

    assert sources_discover(job=hub_job(hub), records=[discovered("http://shop.test/a")]) == 0
    assert not Source.objects.filter(parent=hub).exists()


class FakeSession:
    def __init__(self, batch):
        self.batch = list(batch)

    def drain(self, limit):
        out, self.batch = self.batch[:limit], self.batch[limit:]
        return out


def test_the_job_tracker_keeps_discovered_links_apart_from_items(hub):
    tracker = ItemIngest(hub_job(hub))
    session = FakeSession([{"url": "http://shop.test/p/1", "title": "One"}, discovered("http://shop.test/c/1")])

    tracker.flush(session)

    assert tracker.item_counts()["items"] == 1
    assert list(tracker.discovered) == ["http://shop.test/c/1"]


# --- What a crawl adds to its job's stats --------------------------------------------------------


def test_the_longest_retry_after_of_a_crawl_is_recorded_and_reaches_the_job_stats(hub):
    crawler = get_crawler(scrapy.Spider)
    extension = RetryAfterStats.from_crawler(crawler)
    spider = scrapy.Spider(name="probe")
    for status, header in ((429, "120"), (503, "30"), (200, "99999"), (429, "soon")):
        extension.response_received(
            Response("http://shop.test/", status=status, headers={"Retry-After": header}), None, spider
        )
    scrapy_stats = crawler.stats.get_stats()

    extras = source_crawl_extras(
        job=hub_job(hub), discovered=[discovered("http://shop.test/c/1")], scrapy_stats=scrapy_stats
    )

    assert scrapy_stats[RETRY_AFTER_STAT] == 120
    assert extras == {"retry_after": 120, "discovered": 1, "sources_created": 1}
