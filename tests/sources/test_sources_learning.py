"""Sources learning from their jobs: the interval stretched or brought back, back-off on errors, Retry-After, the
crawl window."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from crawls.models import CrawlJob
from crawls.services import job_claim
from crawls.services.lifecycle import job_end
from sources.scheduling import Window
from sources.services.sources import source_crawl_now
from tests.sources.sources_helpers import dispatch, free_lease, link, make_source

__all__ = ["free_lease", "link"]  # fixtures


def finish(job: CrawlJob, *, error_class: str = "", **stats) -> CrawlJob:
    claimed = job_claim(job_id=job.pk, attempt=job.attempt, worker="test")
    with TestCase.captureOnCommitCallbacks(execute=True):  # the source learns once the job's end is committed
        return job_end(job=claimed, error_class=error_class, stats=stats)


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
