"""Every way a job ends goes through one service and is followed by the same things, whoever ended it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import TestCase
from django.utils import timezone

from callbacks.models import Delivery
from crawls import hooks
from crawls.models import Batch, CrawlJob, ErrorClass, JobStatus
from crawls.publish import FINALIZE_BATCH
from crawls.services import after_end, job_cancel, job_claim
from crawls.services.batch_runs import batch_jobs_end_lost
from crawls.services.cancelling import batch_cancel
from crawls.services.lifecycle import job_end
from crawls.services.reaper import jobs_reap
from registry.models import Scraper
from sources.models import Source

pytestmark = pytest.mark.django_db
# crawls' own follow-ups, then those ops subscribed to crawls.hooks (alerts, counters)
FOLLOWUPS = [followup.__name__ for followup in (*after_end.JOB_FOLLOWUPS, *hooks.JOB_ENDED)]


@pytest.fixture
def followups_seen(monkeypatch):
    """Which follow-ups ran for which job: each real follow-up still runs, wrapped to be seen."""
    seen: dict[str, list[str]] = {}

    def watched(followup):
        def run(job):
            seen.setdefault(str(job.pk), []).append(followup.__name__)
            followup(job)

        run.__name__ = followup.__name__
        return run

    monkeypatch.setattr(after_end, "JOB_FOLLOWUPS", tuple(watched(followup) for followup in after_end.JOB_FOLLOWUPS))
    monkeypatch.setattr(hooks, "JOB_ENDED", [watched(followup) for followup in hooks.JOB_ENDED])
    return seen


def source_job(requester, *, status=JobStatus.QUEUED, attempt=1, max_attempts=3, beat_ago=0.0) -> CrawlJob:
    link = Scraper.objects.get(name="link")
    source = Source.objects.create(url=f"http://shop.test/{Source.objects.count()}", scraper=link)
    batch = Batch.objects.create(requester=requester, status="running", total=1)
    heartbeat = timezone.now() - timedelta(seconds=beat_ago)
    return CrawlJob.objects.create(
        url=source.url,
        scraper=link,
        source=source,
        batch=batch,
        requester=requester,
        callback_url="http://hooks.test/jobs",
        status=status,
        attempt=attempt,
        max_attempts=max_attempts,
        started_at=heartbeat if status == JobStatus.RUNNING else None,
        heartbeat_at=heartbeat if status == JobStatus.RUNNING else None,
    )


def worker_succeeds(requester):
    job = source_job(requester)
    job_end(job=job_claim(job_id=job.pk, attempt=1, worker="w"), stats={"pages": 3, "items": 2})
    return job, JobStatus.SUCCEEDED


def worker_fails(requester):
    job = source_job(requester)
    job_end(job=job_claim(job_id=job.pk, attempt=1, worker="w"), error_class=ErrorClass.HTTP_5XX)
    return job, JobStatus.FAILED


def worker_stops_on_cancel(requester):
    job = source_job(requester)
    claimed = job_claim(job_id=job.pk, attempt=1, worker="w")
    job_cancel(job=claimed)  # running: only flagged; the worker ends it when its crawl stops
    job_end(job=claimed, error_class=ErrorClass.CANCELLED, message="cancelled on request")
    return job, JobStatus.CANCELLED


def cancel_queued_job(requester):
    job = source_job(requester)
    job_cancel(job=job)
    return job, JobStatus.CANCELLED


def cancel_batch(requester):
    job = source_job(requester)
    batch_cancel(batch=job.batch)
    return job, JobStatus.CANCELLED


def reaper_buries(requester, settings):
    settings.TRAWL_REAPER_STALE_SECONDS = 20
    job = source_job(requester, status=JobStatus.RUNNING, attempt=3, max_attempts=3, beat_ago=60)
    jobs_reap()
    return job, JobStatus.DEAD


def batch_sweeper_ends_lost(requester):
    job = source_job(requester, status=JobStatus.RUNNING, beat_ago=3600)
    batch_jobs_end_lost(older_than=600)
    return job, JobStatus.DEAD


PATHS = [
    worker_succeeds,
    worker_fails,
    worker_stops_on_cancel,
    cancel_queued_job,
    cancel_batch,
    reaper_buries,
    batch_sweeper_ends_lost,
]


@pytest.mark.parametrize("path", PATHS, ids=[path.__name__ for path in PATHS])
def test_every_way_a_job_ends_runs_every_follow_up_once_after_commit(
    path, builtins, requester, followups_seen, sent_tasks, settings
):
    with TestCase.captureOnCommitCallbacks(execute=True):
        job, expected = path(requester, settings) if path is reaper_buries else path(requester)
        assert followups_seen == {}, "follow-ups wait for the final state to be committed"
        fed_back = Source.objects.get(pk=job.source_id).last_stats
        assert fed_back["job"] == str(job.pk), "the source's feedback is written with the final state, not after it"

    job.refresh_from_db()
    assert job.status == expected and job.finished_at is not None
    assert followups_seen == {str(job.pk): FOLLOWUPS}
    # The real effects: the source planned its next run from this job, the webhook is queued, the batch finalizes.
    source = Source.objects.get(pk=job.source_id)
    assert source.last_run_at is not None and source.last_stats["job"] == str(job.pk)
    assert "planned when its job ends" not in source.schedule_note
    assert Delivery.objects.filter(job=job, event__in=("job.completed", "job.failed")).count() == 1
    assert (str(job.batch_id),) in sent_tasks.args_of(FINALIZE_BATCH)


def test_a_job_ends_once_whoever_comes_second(builtins, requester, followups_seen, sent_tasks):
    job = source_job(requester)
    claimed = job_claim(job_id=job.pk, attempt=1, worker="w")
    with TestCase.captureOnCommitCallbacks(execute=True):
        first = job_end(job=claimed, error_class=ErrorClass.CANCELLED)
        second = job_end(job=claimed, stats={"pages": 1})  # a late worker: its outcome is dropped

    assert first is not None and second is None
    assert CrawlJob.objects.get(pk=job.pk).status == JobStatus.CANCELLED
    assert followups_seen == {str(job.pk): FOLLOWUPS}


def test_a_failing_source_feedback_leaves_the_job_ended_and_the_follow_ups_run(
    builtins, requester, followups_seen, sent_tasks, monkeypatch
):
    def broken(*, job):
        Source.objects.filter(pk=job.source_id).update(schedule_note="half-written")
        raise RuntimeError("feedback bug")

    monkeypatch.setattr("sources.schedule_feedback.source_job_feedback", broken)
    with TestCase.captureOnCommitCallbacks(execute=True):
        job, expected = worker_succeeds(requester)

    assert CrawlJob.objects.get(pk=job.pk).status == expected
    assert Source.objects.get(pk=job.source_id).schedule_note != "half-written", "the feedback's savepoint rolled back"
    assert followups_seen == {str(job.pk): FOLLOWUPS}
    assert Delivery.objects.filter(job=job).count() == 1
