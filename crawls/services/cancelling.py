"""Cancelling a job or a batch: the one path the API and the admin (the page's button and the list's action) take.
Cancel is cooperative: a Redis flag per job (and per batch, crawls/live/cancel.py) that a running crawl reads
every tick; what has not started ends `cancelled` at once. The status changes are crawls.services.lifecycle's (a
job's) and crawls.services.batch_lifecycle's (a batch's)."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from crawls.live.cancel import cancel_request, cancel_request_batch
from crawls.models import ACTIVE_STATUSES, Batch, CrawlJob, ErrorClass, JobStatus
from crawls.publish import publish_batch_finalize
from crawls.services.batch_lifecycle import batch_cancelled
from crawls.services.lifecycle import job_end, jobs_end
from project.errors import TrawlError

logger = logging.getLogger("trawl.jobs")


@transaction.atomic
def job_cancel(*, job: CrawlJob) -> CrawlJob:
    """Queued jobs end now; running ones are asked to stop (their crawl reads the flag every tick, so it stops within
    about a second) and end `cancelled` — unless the crawl finished first, which keeps its own outcome."""
    job = CrawlJob.objects.select_for_update().get(pk=job.pk)
    if job.status not in ACTIVE_STATUSES:
        raise TrawlError(f"job already ended as {job.status}", status_code=409)
    cancel_request(job_id=job.id)
    if job.cancel_requested_at is None:
        job.cancel_requested_at = timezone.now()
        CrawlJob.objects.filter(pk=job.pk).update(cancel_requested_at=job.cancel_requested_at)
    if job.status == JobStatus.QUEUED:
        job = job_end(
            job=job,
            error_class=ErrorClass.CANCELLED,
            message="cancelled before it started",
            expected_status=JobStatus.QUEUED,
        ) or CrawlJob.objects.get(pk=job.pk)
    return job


@transaction.atomic
def batch_cancel(*, batch: Batch) -> Batch:
    """Queued jobs end `cancelled` now; running crawls see their cancel flag and stop within a heartbeat; the batch
    then finalizes as `cancelled` (now if nothing runs, else when the chord or the sweeper gets there)."""
    batch = Batch.objects.select_for_update().get(pk=batch.pk)
    if batch.finished_at is not None:
        raise TrawlError(f"batch already ended as {batch.status}", status_code=409)
    active = list(batch.jobs.filter(status__in=ACTIVE_STATUSES).values_list("id", flat=True))
    # Flags first: a job claimed after this point sees its flag when it starts.
    cancel_request_batch(batch_id=batch.pk, job_ids=active)
    batch.jobs.filter(pk__in=active, cancel_requested_at__isnull=True).update(cancel_requested_at=timezone.now())
    batch_cancelled(batch_id=batch.pk)
    jobs_end(
        jobs=batch.jobs.all(),
        error_class=ErrorClass.CANCELLED,
        message="cancelled with its batch before it started",
        expected_status=JobStatus.QUEUED,
    )
    transaction.on_commit(lambda: publish_batch_finalize(batch_id=batch.pk), robust=True)
    batch.refresh_from_db()
    logger.info("batch %s cancel requested (%s jobs were active)", batch.pk, len(active))
    return batch
