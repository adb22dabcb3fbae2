"""Run history, deltas on the job detail, monitors checked at the end of a job, and `job.alert` webhooks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from callbacks.models import Delivery
from crawls.models import CrawlJob, JobStatus
from crawls.services.lifecycle import job_end
from crawls.services.monitoring import job_monitors, job_outcome_monitored
from ops.alerts import job_alert_emit
from ops.stats import job_numbers
from registry.models import Scraper, ScraperVersion
from runtime.bridge.outcome import CrawlVerdict
from sources.models import Source
from tests.clients import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def source(builtins):
    return Source.objects.create(url="http://shop.test/list", scraper=Scraper.objects.get(name="link"))


def run(source, *, minutes_ago, items, pages, status=JobStatus.SUCCEEDED, requests=None):
    end = timezone.now() - timedelta(minutes=minutes_ago)
    stats = {
        "pages": pages,
        "items": items,
        "items_new": items,
        "requests": requests or pages,
        "status_codes": {"200": pages},
    }
    return CrawlJob.objects.create(
        url=source.url,
        scraper=source.scraper,
        source=source,
        status=status,
        stats=stats,
        queued_at=end - timedelta(seconds=30),
        started_at=end - timedelta(seconds=20),
        finished_at=end,
    )


def test_runs_newest_first_with_numbers(source):
    first = run(source, minutes_ago=30, items=10, pages=4)
    second = run(source, minutes_ago=10, items=6, pages=5, requests=10)
    second.stats["status_codes"] = {"200": 5, "500": 5}
    second.save()
    admin = client_for("ops", admin=True)

    body = admin.get(f"/api/sources/{source.pk}/runs/").json()

    assert [row["id"] for row in body["results"]] == [str(second.pk), str(first.pk)]
    row = body["results"][0]
    assert (row["pages"], row["items"], row["items_new"], row["items_invalid"]) == (5, 6, 6, 0)
    assert (row["error_rate"], row["duration"], row["status"]) == (0.5, 20.0, "succeeded")
    assert client_for("alice").get(f"/api/sources/{source.pk}/runs/").status_code == 403


def test_job_detail_carries_deltas_against_the_previous_run(source):
    run(source, minutes_ago=30, items=10, pages=4)
    second = run(source, minutes_ago=10, items=6, pages=5)
    admin = client_for("ops", admin=True)

    deltas = admin.get(f"/api/jobs/{second.pk}/").json()["deltas"]

    assert (deltas["items"], deltas["pages"], deltas["duration"]) == (-4, 1, 0.0)
    assert admin.get(f"/api/jobs/{second.pk}/").json()["alerts"] == []


def running_job(source, *, callback_url=""):
    return CrawlJob.objects.create(
        url=source.url, scraper=source.scraper, source=source, status=JobStatus.RUNNING, callback_url=callback_url
    )


def test_monitors_merge_scraper_version_and_source(source):
    version = ScraperVersion.objects.get(scraper__name="link")
    version.scraper.settings = {"TRAWL_MONITORS": {"min_items": 10, "max_error_rate": 0.2}}
    version.settings = {"TRAWL_MONITORS": {"min_items": 5}}
    source.config = {"TRAWL_MONITORS": {"max_error_rate": 0.5}}

    assert job_monitors(job=running_job(source), version=version) == {"min_items": 5, "max_error_rate": 0.5}


def test_breaches_are_stored_by_the_end_which_alerts_and_fails_the_job_when_marked(source, settings):
    settings.TRAWL_ALERT_WEBHOOK_URL = "http://ops.test/alerts"
    for minutes in (50, 40, 30):
        run(source, minutes_ago=minutes, items=100, pages=10)
    job = running_job(source)
    monitors = {"min_items": 100, "max_items_drop": {"value": 0.5, "fail": True}}
    breaches = [
        {"monitor": "min_items", "expected": 100, "actual": 1},
        {"monitor": "max_items_drop", "expected": 0.5, "actual": 0.99},
    ]

    verdict = job_outcome_monitored(
        job=job, verdict=CrawlVerdict(""), stats={"items": 1}, scrapy_stats={}, monitors=monitors
    )

    assert verdict.error_class == "monitor"
    assert "max_items_drop expected 0.5, got 0.99" in verdict.message
    assert verdict.alerts == breaches
    job.refresh_from_db()
    assert job.alerts == [], "nothing is written before the job's end"
    with TestCase.captureOnCommitCallbacks(execute=True):
        ended = job_end(job=job, error_class=verdict.error_class, message=verdict.message, alerts=verdict.alerts)
    assert (ended.status, ended.alerts) == ("failed", breaches)
    alert = Delivery.objects.get(event="job.alert")  # a follow-up of the end: the operators' URL (no callback_url)
    assert (alert.target_url, alert.payload["data"]["alerts"]) == ("http://ops.test/alerts", breaches)


def test_an_end_that_loses_its_race_stores_no_alert_and_sends_none(source, settings):
    settings.TRAWL_ALERT_WEBHOOK_URL = "http://ops.test/alerts"
    job = running_job(source)
    CrawlJob.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED)  # ended elsewhere first

    with TestCase.captureOnCommitCallbacks(execute=True):
        assert job_end(job=job, alerts=[{"monitor": "min_items", "expected": 100, "actual": 1}]) is None

    assert CrawlJob.objects.get(pk=job.pk).alerts == []
    assert not Delivery.objects.filter(event="job.alert").exists()


def test_watchdog_stops_become_error_classes(source):
    job = running_job(source)

    stalled = job_outcome_monitored(
        job=job,
        verdict=CrawlVerdict(""),
        stats={},
        scrapy_stats={"finish_reason": "trawl_stalled", "watchdog/stalled_seconds": 600.0},
        monitors={},
    )
    cancelled = job_outcome_monitored(
        job=job,
        verdict=CrawlVerdict("cancelled"),
        stats={},
        scrapy_stats={"finish_reason": "trawl_stalled"},
        monitors={},
    )

    assert (stalled.error_class, stalled.message) == (
        "stalled",
        "stalled: no response and no item for 600 s (TRAWL_STALL_SECONDS)",
    )
    assert cancelled.error_class == "cancelled"


def test_alert_goes_to_the_callback_and_the_operators_url_once(source, requester, settings):
    settings.TRAWL_ALERT_WEBHOOK_URL = "http://ops.test/alerts"
    job = running_job(source, callback_url="http://hooks.test/trawl")
    job.requester = requester
    job.status, job.alerts = JobStatus.SUCCEEDED, [{"monitor": "min_items", "expected": 100, "actual": 1}]
    job.save()

    assert job_alert_emit(job=job) == 2
    assert job_alert_emit(job=job) == 0

    mine = Delivery.objects.get(target_url="http://hooks.test/trawl")
    assert (mine.event, mine.requester, mine.payload["event"]) == ("job.alert", requester, "job.alert")
    assert mine.payload["data"]["alerts"] == job.alerts
    assert mine.payload["data"]["id"] == str(job.pk)
    assert Delivery.objects.get(target_url="http://ops.test/alerts").requester is None


def test_alerts_are_counted_by_monitor_kind():
    numbers = job_numbers(
        status="succeeded", stats={}, alerts=[{"monitor": "min_coverage.price"}, {"monitor": "min_items"}]
    )

    assert (numbers["alert:min_coverage"], numbers["alert:min_items"]) == (1, 1)


def test_metrics_count_the_alerts_of_ended_jobs(
    client, source, stats_prefix, django_capture_on_commit_callbacks, admin_auth
):
    from ops.services import job_finished_record
    from tests.ops.test_apis import metric_samples

    job = run(source, minutes_ago=1, items=1, pages=1)
    job.alerts = [{"monitor": "min_items", "expected": 100, "actual": 1}]
    with django_capture_on_commit_callbacks(execute=True):
        job_finished_record(job=job)

    samples = metric_samples(client.get("/metrics", HTTP_AUTHORIZATION=admin_auth).content.decode())

    assert samples[("trawl_job_alerts_total", (("monitor", "min_items"),))] == 1
