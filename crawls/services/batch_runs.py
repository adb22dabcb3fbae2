"""Running batches: the chord that launches them, the finalization that ends them exactly once, the sweeper.

The chord is transport, the database is the truth. `batch_finalize` may run from the chord body, from the chord's
error callback, after a batch's last job ended and from the sweeper, in any order and concurrently; a conditional
update lets exactly one of them end the batch, and only that one emits `batch.completed`. Every change of a batch's
status is crawls.services.batch_lifecycle's.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from crawls.live.cancel import cancel_requested_batch
from crawls.models import ACTIVE_STATUSES, FINAL_STATUSES, Batch, BatchStatus, CrawlJob, ErrorClass, JobStatus
from crawls.publish import publish_batch_chord, publish_batch_launch
from crawls.services.batch_lifecycle import batch_end, batch_launched
from crawls.services.lifecycle import jobs_end
from crawls.webhooks import batch_event_emit

logger = logging.getLogger("trawl.batches")


def batch_launch(*, batch_id: object) -> str:
    """Publish the chord: one `run_crawl` per queued job, then `finalize_batch`, which is also its error callback.

    Safe to repeat (the sweeper relaunches batches stuck `pending`): a job runs once because `run_crawl` claims it
    with a compare-and-set, and finalizing is idempotent.
    """
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None or batch.finished_at is not None:
        return "ended"
    if batch.status == BatchStatus.CANCELLED or cancel_requested_batch(batch_id=batch.pk):
        batch_finalize(batch_id=batch.pk)
        return "cancelled"
    queued = batch.jobs.filter(status=JobStatus.QUEUED).order_by("-priority", "queued_at")
    jobs = list(queued.select_related("scraper", "version"))
    if not jobs:
        batch_finalize(batch_id=batch.pk)
        return "nothing to run"
    publish_batch_chord(batch=batch, jobs=jobs)
    # After publishing: a launcher that dies before this line leaves the batch pending, so the sweeper relaunches it.
    batch_launched(batch_id=batch.pk)
    logger.info("batch %s launched: chord of %s jobs", batch.pk, len(jobs))
    return "launched"


def batch_job_counts(*, batch_id: object) -> dict[str, int]:
    rows = CrawlJob.objects.filter(batch_id=batch_id).values("status").annotate(n=Count("id"))
    return {row["status"]: row["n"] for row in rows}


def batch_finalize(*, batch_id: object) -> Batch | None:
    """End the batch if every job has ended: totals rebuilt from the jobs, status `completed` (or `cancelled` if a
    cancel was asked), and one `batch.completed`. Returns the batch only to the one caller that finalized it."""
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None or batch.finished_at is not None:
        return None
    counts = batch_job_counts(batch_id=batch.pk)
    if any(counts.get(status) for status in ACTIVE_STATUSES):
        return None
    totals = {status.value: counts.get(status, 0) for status in FINAL_STATUSES}
    with transaction.atomic():
        if not batch_end(batch_id=batch.pk, totals=totals):
            return None
        batch.refresh_from_db()
        if batch.callback_url:
            batch_event_emit(batch=batch)
    logger.info("batch %s %s: %s", batch.pk, batch.status, totals)
    return batch


def batch_jobs_end_lost(*, older_than: float | None = None) -> int:
    """Backstop for a lost worker: end `dead` (worker_lost) the running jobs of open batches whose heartbeat stopped
    long ago, so the batch can complete. The job reaper should have requeued or ended them well before."""
    seconds = settings.TRAWL_BATCH_JOB_LOST_SECONDS if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=seconds)
    stale = CrawlJob.objects.filter(
        batch__isnull=False, batch__finished_at__isnull=True, status=JobStatus.RUNNING, heartbeat_at__lt=cutoff
    )
    ended = jobs_end(
        jobs=stale,
        error_class=ErrorClass.WORKER_LOST,
        message=f"no heartbeat for over {seconds:.0f}s: its worker was lost",
    )
    for job in ended:
        logger.warning("batch job %s attempt %s lost its worker; ended dead", job.pk, job.attempt)
    return len(ended)


def batches_sweep() -> dict[str, int]:
    """Beat's safety net for batches: end lost jobs, relaunch lost launches, finalize batches whose callback never
    came (hard time limit, lost worker, lost message)."""
    lost = batch_jobs_end_lost()
    launch_cutoff = timezone.now() - timedelta(seconds=settings.TRAWL_BATCH_LAUNCH_GRACE_SECONDS)
    stuck = Batch.objects.filter(status=BatchStatus.PENDING, finished_at__isnull=True, created_at__lt=launch_cutoff)
    relaunched = list(stuck.only("id", "priority")[:100])
    for batch in relaunched:
        logger.warning("batch %s still pending after the launch grace; launching it again", batch.pk)
        publish_batch_launch(batch=batch)
    done = (
        Batch.objects.filter(finished_at__isnull=True)
        .exclude(status=BatchStatus.PENDING)
        .exclude(jobs__status__in=ACTIVE_STATUSES)
    )
    finalized = [batch_id for batch_id in done.values_list("id", flat=True)[:500] if batch_finalize(batch_id=batch_id)]
    if finalized:
        logger.warning("sweeper finalized %s batch(es) whose chord callback had not come", len(finalized))
    return {"lost_jobs": lost, "relaunched": len(relaunched), "finalized": len(finalized)}
