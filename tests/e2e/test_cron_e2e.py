"""A cron source on a real `celery beat` and a real worker: dispatched in its minute, not before, then booked again."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from crawls.models import CrawlJob
from project.periodic import periodic_tasks_ensure
from sources.models import Source
from tests.callbacks.harness import Beat

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def beat(tmp_path, crawl_worker):
    periodic_tasks_ensure()  # the migration's rows (a transactional test's flush removed them)
    running = Beat(log_dir=tmp_path)
    try:
        yield running
    finally:
        running.stop()


def wait_for_jobs(source: Source, count: int, beat: Beat) -> list[CrawlJob]:
    deadline = time.monotonic() + 150
    while CrawlJob.objects.filter(source=source).count() < count:
        assert time.monotonic() < deadline, beat.log_tail()
        time.sleep(0.5)
    return list(CrawlJob.objects.filter(source=source).order_by("queued_at"))


def test_a_cron_source_is_dispatched_at_its_minute_and_again_at_the_next(admin_api, builtins, site, beat, job_waiter):
    created = admin_api.post(
        "/api/sources/", {"url": f"{site.url}/product-1.html", "cron": "*/1 * * * *"}, format="json"
    )
    assert created.status_code == 201, created.content
    source = Source.objects.get(pk=created.json()["id"])
    minute = source.next_sync_at
    assert (minute.second, minute.microsecond) == (0, 0), minute  # booked at the expression's next minute
    beat.start()

    (first,) = wait_for_jobs(source, 1, beat)
    assert minute <= first.queued_at < minute + timedelta(seconds=60), (minute, first.queued_at)
    assert job_waiter(str(first.pk)).status == "succeeded"
    source.refresh_from_db()
    following = source.next_sync_at
    assert (following.second, following.microsecond) == (0, 0) and following > first.queued_at, following
    assert "cron" in source.schedule_note

    second = wait_for_jobs(source, 2, beat)[1]
    assert following <= second.queued_at < following + timedelta(seconds=60), (following, second.queued_at)
    job_waiter(str(second.pk))
