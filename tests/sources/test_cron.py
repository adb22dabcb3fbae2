"""Cron sources: the expression's next minute in the source's timezone, checked on save, booked by dispatch and by the
end of each job instead of the adaptive interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from sources.cron import CronError, cron_next, cron_parse
from sources.models import Source
from sources.services.feedback import source_job_feedback
from tests.sources.sources_helpers import dispatch, free_lease, link, make_source

__all__ = ["free_lease", "link"]  # fixtures

AT = datetime(2026, 11, 29, 7, 31, 20, tzinfo=UTC)


def test_next_minute_of_common_expressions():
    assert cron_next("*/1 * * * *", after=AT) == datetime(2026, 11, 29, 7, 32, tzinfo=UTC)
    assert cron_next("*/15 * * * *", after=AT) == datetime(2026, 11, 29, 7, 45, tzinfo=UTC)
    assert cron_next("30 7 * * *", after=AT) == datetime(2026, 11, 30, 7, 30, tzinfo=UTC)  # 07:30 has passed today


def test_the_expression_reads_in_the_sources_timezone():
    # 06:00 on weekdays in Paris (UTC+1 in winter): Sunday the 29th → Monday the 30th, 05:00 UTC.
    assert cron_next("0 6 * * mon-fri", after=AT, timezone="Europe/Paris") == datetime(2026, 11, 30, 5, tzinfo=UTC)
    # Summer time: UTC+2.
    summer = datetime(2026, 7, 1, 12, tzinfo=UTC)
    assert cron_next("0 6 * * *", after=summer, timezone="Europe/Paris") == datetime(2026, 7, 2, 4, tzinfo=UTC)


def test_a_minute_repeated_by_the_fall_back_runs_once_and_one_skipped_by_spring_forward_runs_after_the_jump():
    before_fall = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)  # Paris goes 03:00 CEST → 02:00 CET at 01:00 UTC
    first = cron_next("30 2 * * *", after=before_fall, timezone="Europe/Paris")
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert cron_next("30 2 * * *", after=first, timezone="Europe/Paris") == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)
    spring = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)  # 02:00 CET → 03:00 CEST at 01:00 UTC: 02:30 never shows
    assert cron_next("30 2 * * *", after=spring, timezone="Europe/Paris") == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)


def test_day_of_month_and_weekday_both_restricted_match_either_as_in_cron():
    # The 29th of February or any Monday: Monday 1 February 2027 comes first.
    assert cron_next("0 0 29 2 mon", after=AT) == datetime(2027, 2, 1, tzinfo=UTC)


@pytest.mark.parametrize("bad", ["* * *", "61 * * * *", "x * * * *", "* * * * 8", "* 24 * * *", "a" * 101])
def test_bad_expressions_say_what_is_wrong(bad):
    with pytest.raises(CronError):
        cron_parse(bad)


@pytest.mark.django_db
def test_the_api_takes_a_cron_and_books_its_next_minute_and_names_a_bad_one(admin_api, builtins):
    created = admin_api.post(
        "/api/sources/", {"url": "http://shop.test/list-1.html", "cron": "*/1 * * * *"}, format="json"
    )
    bad = admin_api.post("/api/sources/", {"url": "http://shop.test/list-2.html", "cron": "61 * * * *"}, format="json")

    assert created.status_code == 201, created.content
    source = Source.objects.get(pk=created.json()["id"])
    assert source.cron == "*/1 * * * *"
    assert source.next_sync_at.second == 0 and timezone.now() < source.next_sync_at <= timezone.now() + timedelta(
        seconds=60
    )
    assert bad.status_code == 400 and "cron" in bad.json()


@pytest.mark.django_db
def test_dispatch_books_a_cron_sources_next_minute_not_its_interval(link):
    now = datetime(2026, 11, 29, 7, 32, 5, tzinfo=UTC)
    source = make_source(link, 1, next_sync_at=now - timedelta(seconds=5), current_interval=3600, cron="*/10 * * * *")

    (job,) = dispatch(now=now)

    source.refresh_from_db()
    assert job.source_id == source.pk
    assert source.next_sync_at == datetime(2026, 11, 29, 7, 40, tzinfo=UTC)


@pytest.mark.django_db
def test_a_cron_sources_job_end_books_its_next_minute_or_after_the_backoff(link):
    source = make_source(link, 1, cron="0 * * * *", timezone="Asia/Kolkata")  # UTC+5:30: the hour is at :30 UTC
    ended = datetime(2026, 11, 29, 7, 31, 20, tzinfo=UTC)
    job = CrawlJob.objects.create(
        url=source.url, scraper=link, source=source, status=JobStatus.SUCCEEDED, finished_at=ended, stats={"items": 1}
    )

    assert source_job_feedback(job=job).next_sync_at == datetime(2026, 11, 29, 8, 30, tzinfo=UTC)

    job.status, job.error_class = JobStatus.FAILED, "blocked"  # backs off 1 h first: then its next minute
    job.save()
    assert source_job_feedback(job=job).next_sync_at == datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
