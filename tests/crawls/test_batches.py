"""Batch services: finalizing exactly once whoever calls it, cancelling, and the sweeper's safety nets."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from callbacks.models import Delivery
from crawls.models import Batch, CrawlJob
from crawls.publish import FINALIZE_BATCH, LAUNCH_BATCH
from crawls.services.batch_runs import batch_finalize, batch_jobs_end_lost, batch_launch, batches_sweep
from crawls.services.batches import batch_create
from crawls.services.cancelling import batch_cancel

SHOP = "http://shop.test"


@pytest.fixture
def no_publish(sent_tasks):
    """Launcher, finalize and delivery tasks are recorded instead of sent to the broker."""
    return sent_tasks


def make_batch(requester, count=3, **kwargs):
    return batch_create(
        requester=requester,
        jobs=[{"url": f"{SHOP}/p/{n}"} for n in range(count)],
        callback_url="http://hooks.test/b",
        **kwargs,
    )


def end_jobs(batch, *statuses):
    for job, status in zip(batch.jobs.order_by("queued_at"), statuses, strict=True):
        CrawlJob.objects.filter(pk=job.pk).update(status=status, finished_at=timezone.now())


@pytest.mark.django_db
def test_finalize_waits_for_every_job_then_ends_the_batch_once(requester, builtins, no_publish):
    batch = make_batch(requester)
    end_jobs(batch, "succeeded", "failed", "running")

    assert batch_finalize(batch_id=batch.pk) is None
    CrawlJob.objects.filter(batch=batch, status="running").update(status="dead")
    finalized = batch_finalize(batch_id=batch.pk)
    again = batch_finalize(batch_id=batch.pk)

    assert finalized is not None and again is None
    assert finalized.status == "completed"
    assert finalized.totals == {"succeeded": 1, "failed": 1, "cancelled": 0, "dead": 1}
    assert finalized.finished_at is not None
    [delivery] = Delivery.objects.filter(batch=batch)
    assert delivery.event == "batch.completed"
    assert delivery.payload["data"]["totals"] == finalized.totals


@pytest.mark.django_db(transaction=True)
def test_concurrent_finalizers_emit_exactly_one_batch_completed(requester, builtins, no_publish, monkeypatch):
    # The chord body, its error callback and the sweeper may all run at once: one wins, whatever the timing.
    batch = make_batch(requester, count=2)
    end_jobs(batch, "succeeded", "succeeded")
    results, start = [], threading.Barrier(8)

    def finalize():
        start.wait()
        try:
            results.append(batch_finalize(batch_id=batch.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=finalize) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(results) == 8
    assert sum(result is not None for result in results) == 1
    assert Delivery.objects.filter(batch=batch, event="batch.completed").count() == 1


@pytest.mark.django_db
def test_a_cancelled_batch_finalizes_as_cancelled_with_its_totals(requester, builtins, no_publish):
    batch = make_batch(requester)
    end_jobs(batch, "succeeded", "queued", "queued")

    batch_cancel(batch=batch)
    finalized = batch_finalize(batch_id=batch.pk)

    assert finalized.status == "cancelled"
    assert finalized.totals == {"succeeded": 1, "failed": 0, "cancelled": 2, "dead": 0}
    assert set(batch.jobs.filter(status="cancelled").values_list("error_class", flat=True)) == {"cancelled"}
    assert no_publish.args_of(FINALIZE_BATCH) == []  # queued on commit; this test's transaction never commits


@pytest.mark.django_db
def test_cancelled_queued_jobs_with_a_callback_get_job_failed(
    requester, builtins, no_publish, monkeypatch, django_capture_on_commit_callbacks
):
    batch = batch_create(
        requester=requester, jobs=[{"url": f"{SHOP}/a", "callback_url": "http://hooks.test/j"}, {"url": f"{SHOP}/b"}]
    )

    with django_capture_on_commit_callbacks(execute=True):
        batch_cancel(batch=batch)

    [delivery] = Delivery.objects.all()
    assert delivery.event == "job.failed"
    assert (delivery.payload["data"]["status"], delivery.payload["data"]["error_class"]) == ("cancelled", "cancelled")


@pytest.mark.django_db
def test_launching_a_cancelled_batch_publishes_nothing_and_finalizes_it(requester, builtins, no_publish):
    batch = make_batch(requester)
    batch_cancel(batch=batch)

    assert batch_launch(batch_id=batch.pk) == "cancelled"
    assert Batch.objects.get(pk=batch.pk).status == "cancelled"
    assert Batch.objects.get(pk=batch.pk).finished_at is not None


@pytest.mark.django_db
def test_running_batch_jobs_without_heartbeat_end_dead_worker_lost(requester, builtins, no_publish):
    batch = make_batch(requester, count=2)
    stale, fresh = batch.jobs.order_by("queued_at")
    now = timezone.now()
    CrawlJob.objects.filter(pk=stale.pk).update(status="running", heartbeat_at=now - timedelta(minutes=30))
    CrawlJob.objects.filter(pk=fresh.pk).update(status="running", heartbeat_at=now)

    assert batch_jobs_end_lost(older_than=600) == 1

    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (stale.status, stale.error_class, fresh.status) == ("dead", "worker_lost", "running")


@pytest.mark.django_db
def test_sweeper_finalizes_batches_whose_callback_never_came_and_relaunches_lost_launches(
    requester, builtins, no_publish, settings
):
    settings.TRAWL_BATCH_LAUNCH_GRACE_SECONDS = 60
    orphan = make_batch(requester, count=2)
    Batch.objects.filter(pk=orphan.pk).update(status="running")
    end_jobs(orphan, "succeeded", "failed")
    unlaunched = make_batch(requester, count=1)
    Batch.objects.filter(pk=unlaunched.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    busy = make_batch(requester, count=1)
    Batch.objects.filter(pk=busy.pk).update(status="running")

    swept = batches_sweep()

    assert swept == {"lost_jobs": 0, "relaunched": 1, "finalized": 1}
    assert Batch.objects.get(pk=orphan.pk).status == "completed"
    assert no_publish.args_of(LAUNCH_BATCH)[-1] == (str(unlaunched.pk),)
    assert Batch.objects.get(pk=busy.pk).finished_at is None
    assert batches_sweep()["finalized"] == 0
    assert Delivery.objects.filter(batch=orphan).count() == 1
