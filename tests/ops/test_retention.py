"""Retention: old finished jobs go with their logs, sightings and deliveries; items and each source's last job stay."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from access.tenancy import system_tenant
from callbacks.models import Delivery, DeliveryAttempt
from crawls.logs.joblog import job_log_lines, job_log_sink, job_log_store
from crawls.models import CrawlJob, JobLog, JobStatus
from items.models import Item, ItemSighting
from project.periodic import periodic_tasks_ensure
from project.redis import get_redis, redis_key
from registry.models import Scraper
from sources.models import Source

pytestmark = pytest.mark.django_db


def make_job(*, days_ago: float, status=JobStatus.SUCCEEDED, source=None):
    finished = timezone.now() - timedelta(days=days_ago)
    return CrawlJob.objects.create(
        url="http://shop.test/",
        scraper=Scraper.objects.get(name="link"),
        status=status,
        source=source,
        queued_at=finished - timedelta(minutes=1),
        finished_at=None if status == JobStatus.RUNNING else finished,
    )


@pytest.fixture
def world(builtins):
    link = Scraper.objects.get(name="link")
    source = Source.objects.create(url="http://shop.test/list", scraper=link)
    old = make_job(days_ago=40)
    item = Item.objects.create(
        tenant=system_tenant(), scraper=link, fingerprint="f1", data={"title": "x"}, content_hash="h", last_job=old
    )
    ItemSighting.objects.create(job=old, item=item, change="new")
    job_log_sink(job_id=old.pk, attempt=1).write(["2026-11-23T09:00:00.000Z INFO shop hello"])
    job_log_store(job_id=old.pk, attempt=1)
    delivery = Delivery.objects.create(
        event="job.completed", dedupe_key=f"job:{old.pk}", job=old, target_url="http://hooks.test/", payload={}
    )
    DeliveryAttempt.objects.create(delivery=delivery, number=1, started_at=timezone.now(), duration_ms=1)
    older = make_job(days_ago=50, source=source)
    job_log_sink(job_id=older.pk, attempt=1).write(["2026-11-23T09:00:00.000Z INFO shop left by a dead worker"])
    return {
        "old": old,
        "item": item,
        "older_of_source": older,
        "last_of_source": make_job(days_ago=45, status=JobStatus.FAILED, source=source),
        "recent": make_job(days_ago=2),
        "running": make_job(days_ago=60, status=JobStatus.RUNNING),
    }


def test_cleanup_removes_old_jobs_with_their_logs_sightings_and_deliveries(world):
    out = StringIO()
    call_command("trawl_cleanup", "--days", "30", stdout=out)

    remaining = set(CrawlJob.objects.values_list("pk", flat=True))
    assert remaining == {world[name].pk for name in ("last_of_source", "recent", "running")}
    assert not JobLog.objects.exists() and not ItemSighting.objects.exists()
    assert not Delivery.objects.exists() and not DeliveryAttempt.objects.exists()
    assert job_log_lines(job=world["old"]) == []
    assert not list(get_redis().scan_iter(match=redis_key("joblog", world["older_of_source"].pk, "*")))
    world["item"].refresh_from_db()
    assert world["item"].last_job is None
    assert "removed (finished more than 30 days ago): 2 jobs, 1 logs, 1 sightings, 1 deliveries" in out.getvalue()
    assert f"job {world['old'].pk} succeeded" in out.getvalue()


def test_dry_run_lists_and_counts_but_deletes_nothing(world, settings):
    settings.TRAWL_RETENTION_CHUNK = 1  # pages through chunks without skipping any
    out = StringIO()
    call_command("trawl_cleanup", "--days", "30", "--dry-run", stdout=out)

    assert CrawlJob.objects.count() == 5
    assert out.getvalue().count("would remove job") == 2
    assert "would remove (finished more than 30 days ago): 2 jobs, 1 logs, 1 sightings, 1 deliveries" in out.getvalue()


def test_days_zero_keeps_only_active_jobs_and_each_sources_last(world):
    call_command("trawl_cleanup", "--days", "0", stdout=StringIO())

    remaining = set(CrawlJob.objects.values_list("pk", flat=True))
    assert remaining == {world["last_of_source"].pk, world["running"].pk}
    assert Item.objects.count() == 1


def test_cleanup_runs_in_chunks(world, settings):
    from ops.retention import jobs_cleanup

    settings.TRAWL_RETENTION_CHUNK = 1

    assert jobs_cleanup(days=0)["jobs"] == 3


def test_retention_defaults_and_beat_task(settings):
    from django_celery_beat.models import PeriodicTask

    assert settings.TRAWL_RETENTION_DAYS == 30
    assert settings.TRAWL_STALL_SECONDS == 600
    periodic_tasks_ensure()  # what the data migrations run: a transactional test run before this one empties the table
    task = PeriodicTask.objects.get(name="cleanup-jobs")
    assert (task.task, task.interval.every) == ("ops.tasks.cleanup_jobs", 3600)
