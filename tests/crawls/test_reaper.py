"""The job reaper: stale running jobs are requeued (attempt + 1) or end dead; lost queued messages are republished."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from callbacks.models import Delivery
from crawls.models import Batch, CrawlJob
from crawls.publish import FINALIZE_BATCH, RUN_CRAWL
from crawls.services import reaper
from crawls.services.batch_runs import batch_finalize
from crawls.services.lifecycle import job_claim, job_end
from crawls.tasks import reap_dead_jobs
from registry.models import Scraper

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(sent_tasks):
    """`run_crawl` publications recorded as (job id, attempt); batch finalizes run inline instead of on a worker."""
    sent_tasks.inline[FINALIZE_BATCH] = lambda batch_id: batch_finalize(batch_id=batch_id)

    return sent_tasks


@pytest.fixture
def fast(settings):
    settings.TRAWL_REAPER_STALE_SECONDS = 20
    settings.TRAWL_REAPER_QUEUED_SECONDS = 60
    return settings


def make_job(*, status="running", attempt=1, max_attempts=3, beat_ago=0.0, queued_ago=0.0, **kwargs) -> CrawlJob:
    now = timezone.now()
    return CrawlJob.objects.create(
        url="http://shop.test/p/1",
        scraper=Scraper.objects.get(name="link"),
        status=status,
        attempt=attempt,
        max_attempts=max_attempts,
        worker="w1@host/123" if status == "running" else "",
        started_at=now - timedelta(seconds=beat_ago) if status == "running" else None,
        heartbeat_at=now - timedelta(seconds=beat_ago) if status == "running" else None,
        queued_at=now - timedelta(seconds=queued_ago),
        **kwargs,
    )


def test_a_job_whose_attempt_still_beats_in_redis_is_alive_whatever_its_rows_heartbeat(builtins, published, fast):
    """The liveness thread beats in Redis, not in the database (a crawl process's connection budget): a slow tick
    leaves the row's heartbeat old, and the job must stay with its worker. Only the current attempt's beat counts."""
    from crawls.live.beats import beat_write

    slow = make_job(beat_ago=30, attempt=2)
    beat_write(job_id=slow.pk, attempt=2)
    superseded = make_job(beat_ago=30, attempt=2)
    beat_write(job_id=superseded.pk, attempt=1)  # an earlier attempt's thread, still beating

    assert reap_dead_jobs() == {"requeued": 1, "dead": 0, "republished": 0}

    slow.refresh_from_db()
    superseded.refresh_from_db()
    assert (slow.status, slow.attempt) == ("running", 2)
    assert (superseded.status, superseded.attempt) == ("queued", 3)


def test_a_running_job_with_a_stale_heartbeat_is_requeued_as_the_next_attempt(builtins, published, fast):
    job = make_job(beat_ago=30)

    assert reap_dead_jobs() == {"requeued": 1, "dead": 0, "republished": 0}

    job.refresh_from_db()
    assert (job.status, job.attempt, job.worker, job.finished_at) == ("queued", 2, "", None)
    assert published.args_of(RUN_CRAWL) == [(str(job.pk), 2)]


def test_a_job_that_heartbeats_keeps_running(builtins, published, fast):
    job = make_job(beat_ago=5)

    assert reaper.jobs_reap() == {"requeued": 0, "dead": 0, "republished": 0}

    job.refresh_from_db()
    assert (job.status, job.attempt) == ("running", 1)
    assert published.args_of(RUN_CRAWL) == []


def test_after_a_requeue_the_old_attempt_can_neither_claim_nor_finish_and_the_new_one_runs(builtins, published, fast):
    job = make_job(beat_ago=30)
    old_owner = CrawlJob.objects.get(pk=job.pk)
    reaper.jobs_reap()

    # The lost worker's message redelivered, and the lost worker itself coming back to report: both ignored.
    assert job_claim(job_id=str(job.pk), attempt=1, worker="w1") is None
    assert job_end(job=old_owner, error_class="") is None
    claimed = job_claim(job_id=str(job.pk), attempt=2, worker="w2")

    assert claimed is not None and (claimed.status, claimed.attempt, claimed.worker) == ("running", 2, "w2")


def test_the_last_attempt_lost_ends_dead_worker_lost_with_its_webhook(
    builtins, published, fast, django_capture_on_commit_callbacks, monkeypatch
):
    job = make_job(attempt=3, max_attempts=3, beat_ago=30, callback_url="http://hooks.test/j")

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.jobs_reap() == {"requeued": 0, "dead": 1, "republished": 0}

    job.refresh_from_db()
    assert (job.status, job.error_class, job.attempt) == ("dead", "worker_lost", 3)
    assert job.finished_at is not None and "no heartbeat" in job.error_message
    assert published.args_of(RUN_CRAWL) == []
    assert Delivery.objects.filter(job=job, event="job.failed").count() == 1


def test_a_batch_whose_last_job_is_buried_completes(
    builtins, published, fast, requester, django_capture_on_commit_callbacks
):
    batch = Batch.objects.create(requester=requester, status="running", total=2)
    make_job(status="succeeded", batch=batch)
    lost = make_job(attempt=2, max_attempts=2, beat_ago=60, batch=batch)

    with django_capture_on_commit_callbacks(execute=True):
        reaper.jobs_reap()

    batch.refresh_from_db()
    lost.refresh_from_db()
    assert lost.status == "dead"
    assert (batch.status, batch.totals["dead"], batch.totals["succeeded"]) == ("completed", 1, 1)


def test_queued_jobs_never_claimed_are_republished_once_per_grace_with_the_same_attempt(builtins, published, fast):
    lost = make_job(status="queued", attempt=2, queued_ago=120)
    make_job(status="queued", queued_ago=10)  # recent: its message is probably still in the queue
    pending = Batch.objects.create(status="pending", total=1)
    make_job(status="queued", queued_ago=120, batch=pending)  # the batch sweeper relaunches pending batches

    assert reaper.jobs_reap()["republished"] == 1
    assert reaper.jobs_reap()["republished"] == 0

    assert published.args_of(RUN_CRAWL) == [(str(lost.pk), 2)]
    lost.refresh_from_db()
    assert (lost.status, lost.attempt) == ("queued", 2)


def test_the_reaper_is_a_periodic_task_at_its_setting(settings):
    from django_celery_beat.models import PeriodicTask

    from project.periodic import periodic_tasks_ensure

    PeriodicTask.objects.filter(name="reap-dead-jobs").delete()
    settings.TRAWL_REAPER_INTERVAL_SECONDS = 7
    periodic_tasks_ensure()

    task = PeriodicTask.objects.get(name="reap-dead-jobs")
    assert (task.task, task.interval.every, task.queue) == ("crawls.tasks.reap_dead_jobs", 7, "control")


def test_default_thresholds_act_well_before_the_batch_backstop_and_the_visibility_timeout():
    from django.conf import settings

    import celeryconfig

    assert settings.TRAWL_REAPER_STALE_SECONDS >= 3 * settings.TRAWL_HEARTBEAT_SECONDS
    assert settings.TRAWL_REAPER_STALE_SECONDS + settings.TRAWL_REAPER_INTERVAL_SECONDS < (
        settings.TRAWL_BATCH_JOB_LOST_SECONDS
    )
    assert celeryconfig.broker_transport_options["visibility_timeout"] > celeryconfig.task_time_limit
    assert celeryconfig.task_acks_late and celeryconfig.task_reject_on_worker_lost
    assert celeryconfig.worker_prefetch_multiplier == 1


def test_a_job_requeued_for_an_infrastructure_fault_keeps_its_attempts_and_blames_no_site(builtins, published):
    from crawls.services.lifecycle import AttemptCause, job_attempt_over
    from sources.models import Source

    source = Source.objects.create(url="http://shop.test/list", scraper=Scraper.objects.get(name="link"))
    job = make_job(status="running", source=source)

    requeued = job_attempt_over(
        job=job, cause=AttemptCause.INFRASTRUCTURE, reason="OperationalError: database is locked"
    )

    source.refresh_from_db()
    assert (requeued.status, requeued.attempt, requeued.max_attempts) == ("queued", 2, 4)
    assert (requeued.error_class, requeued.finished_at) == ("", None)
    assert source.consecutive_failures == 0
    assert published.args_of(RUN_CRAWL) == [(str(job.pk), 2)]
    # That attempt is no longer running.
    assert job_attempt_over(job=job, cause=AttemptCause.INFRASTRUCTURE, reason="again") is None
