"""Sources: dispatching the due ones (lease, booking, windows) and crawl now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from crawls.publish import RUN_CRAWL
from project.errors import TrawlError
from project.redis.lease import Lease
from sources.models import Source
from sources.services.sources import DISPATCH_LEASE, source_crawl_now, sources_dispatch_due
from tests.sources.sources_helpers import dispatch, free_lease, link, make_source

__all__ = ["free_lease", "link"]  # fixtures

# --- Dispatch ------------------------------------------------------------------------------------


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
