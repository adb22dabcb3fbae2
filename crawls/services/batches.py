"""Batches: many jobs submitted at once, run as one Celery chord, cancelled together, finalized exactly once.

The chord is transport, the database is the truth. `batch_finalize` may run from the chord body, from the chord's
error callback and from the sweeper, in any order and concurrently; a conditional update lets exactly one of them end
the batch, and only that one emits `batch.completed`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import chord
from django.conf import settings
from django.db import transaction
from django.db.models import Case, Count, Value, When
from django.utils import timezone

from access.models import Requester
from crawls.cancel import cancel_request_batch, cancel_requested_batch
from crawls.models import ACTIVE_STATUSES, Batch, BatchStatus, CrawlJob, ErrorClass, JobStatus
from crawls.scheduling import broker_priority
from crawls.services.jobs import job_counted, job_notify, job_validate, validate_crawl_url
from project.errors import TrawlError
from project.net import target_check
from registry.models import Scraper

logger = logging.getLogger("trawl.batches")

FINAL_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.DEAD)
SPEC_FIELDS = ("url", "scraper", "version", "variant", "priority", "callback_url", "options")


class BatchSpecError(TrawlError):
    """Some job specs of a batch are invalid; the 400 names each one: {"jobs": {"3": {"scraper": ["..."]}}}."""

    def __init__(self, errors: dict[int, dict[str, list[str]]]) -> None:
        super().__init__(f"job spec {min(errors)} is invalid", field="jobs")
        self.errors = errors

    def as_dict(self) -> dict:
        return {"jobs": {str(index): errors for index, errors in sorted(self.errors.items())}}


@transaction.atomic
def batch_create(
    *,
    jobs: list[dict[str, Any]],
    requester: Requester | None = None,
    name: str = "",
    priority: int = 50,
    callback_url: str = "",
) -> Batch:
    """Check every job spec first (nothing is created if one is bad), store the batch and its jobs queued, and
    queue the launcher task that publishes the chord once this commits. Job specs default to the batch priority."""
    if not jobs:
        raise TrawlError("a batch needs at least one job", field="jobs")
    if len(jobs) > settings.TRAWL_BATCH_MAX_JOBS:
        raise TrawlError(f"a batch holds at most {settings.TRAWL_BATCH_MAX_JOBS} jobs, got {len(jobs)}", field="jobs")
    if not 1 <= int(priority) <= 100:
        raise TrawlError(f"priority must be between 1 and 100, got {priority}", field="priority")
    if callback_url:
        validate_crawl_url(callback_url, field="callback_url")
        target_check(callback_url, field="callback_url")
    specs = [{"priority": priority, **spec} for spec in jobs]
    scrapers, errors = [], {}
    for index, spec in enumerate(specs):
        try:
            scrapers.append(_spec_validate(spec, requester=requester))
        except TrawlError as exc:
            errors[index] = {exc.field or "detail": [exc.message]}
    if errors:
        raise BatchSpecError(errors)
    batch = Batch.objects.create(
        requester=requester, name=name, priority=priority, callback_url=callback_url, total=len(specs)
    )
    CrawlJob.objects.bulk_create(
        [_job(batch, spec, scraper) for spec, scraper in zip(specs, scrapers, strict=True)], batch_size=500
    )
    # robust: if the broker is away the batch stays `pending` and the sweeper launches it after the grace.
    transaction.on_commit(lambda: batch_launch_publish(batch=batch), robust=True)
    logger.info("batch %s created with %s jobs by %s", batch.pk, batch.total, requester)
    return batch


def _spec_validate(spec: dict[str, Any], *, requester: Requester | None = None) -> Scraper:
    unknown = sorted(set(spec) - set(SPEC_FIELDS))
    if unknown:
        raise TrawlError("unknown field", field=unknown[0])
    return job_validate(
        url=spec.get("url") or "",
        scraper=spec.get("scraper") or "",
        version=spec.get("version") or "",
        variant=spec.get("variant") or "",
        priority=spec["priority"],
        callback_url=spec.get("callback_url") or "",
        requester=requester,
    )


def _job(batch: Batch, spec: dict[str, Any], scraper: Scraper) -> CrawlJob:
    return CrawlJob(
        batch=batch,
        requester=batch.requester,
        url=spec["url"],
        scraper=scraper,
        requested_version=spec.get("version") or "",
        requested_variant=spec.get("variant") or "",
        priority=spec["priority"],
        callback_url=spec.get("callback_url") or "",
        options=spec.get("options") or {},
    )


def batch_launch_publish(*, batch: Batch) -> None:
    from crawls.tasks import launch_batch

    launch_batch.apply_async(args=[str(batch.pk)], priority=broker_priority(batch.priority))


def batch_launch(*, batch_id: object) -> str:
    """Publish the chord: one `run_crawl` per queued job, then `finalize_batch`, which is also its error callback.

    Safe to repeat (the sweeper relaunches batches stuck `pending`): a job runs once because `run_crawl` claims it
    with a compare-and-set, and finalizing is idempotent.
    """
    from crawls.tasks import run_crawl

    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None or batch.finished_at is not None:
        return "ended"
    if batch.status == BatchStatus.CANCELLED or cancel_requested_batch(batch_id=batch.pk):
        batch_finalize(batch_id=batch.pk)
        return "cancelled"
    queued = batch.jobs.filter(status=JobStatus.QUEUED).order_by("-priority", "queued_at")
    header = [
        run_crawl.si(str(job_id), attempt).set(priority=broker_priority(priority))
        for job_id, attempt, priority in queued.values_list("id", "attempt", "priority")
    ]
    if not header:
        batch_finalize(batch_id=batch.pk)
        return "nothing to run"
    batch_chord(batch_id=batch.pk, header=header).apply_async()
    # After publishing: a launcher that dies before this line leaves the batch pending, so the sweeper relaunches it.
    Batch.objects.filter(pk=batch.pk, status=BatchStatus.PENDING).update(status=BatchStatus.RUNNING)
    logger.info("batch %s launched: chord of %s jobs", batch.pk, len(header))
    return "launched"


def batch_chord(*, batch_id: object, header: list) -> chord:
    """`header` then `finalize_batch`; the same finalize is the error callback, run if a header task raises."""
    from crawls.tasks import finalize_batch

    body = finalize_batch.si(str(batch_id))
    body.on_error(finalize_batch.si(str(batch_id)))
    return chord(header, body)


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
        # The status is decided in the same statement, so a cancel racing this update is never lost.
        final_status = Case(
            When(status=BatchStatus.CANCELLED, then=Value(BatchStatus.CANCELLED.value)),
            default=Value(BatchStatus.COMPLETED.value),
        )
        won = Batch.objects.filter(pk=batch.pk, finished_at__isnull=True).update(
            status=final_status, totals=totals, finished_at=timezone.now()
        )
        if not won:
            return None
        batch.refresh_from_db()
        if batch.callback_url:
            from callbacks.services import batch_event_emit

            batch_event_emit(batch=batch)
    logger.info("batch %s %s: %s", batch.pk, batch.status, totals)
    return batch


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
    Batch.objects.filter(pk=batch.pk, finished_at__isnull=True).update(status=BatchStatus.CANCELLED)
    queued = batch.jobs.filter(status=JobStatus.QUEUED)
    queued_ids, now = list(queued.values_list("id", flat=True)), timezone.now()
    queued.update(
        status=JobStatus.CANCELLED,
        error_class=ErrorClass.CANCELLED,
        error_message="cancelled with its batch before it started",
        finished_at=now,
    )
    # The same hooks as a job that ends by itself (webhook, counters), for those this update ended.
    ended = CrawlJob.objects.filter(pk__in=queued_ids, status=JobStatus.CANCELLED, finished_at=now)
    for job in ended.select_related("scraper", "version"):
        job_notify(job=job)
        job_counted(job=job)
    transaction.on_commit(lambda: finalize_publish(batch_id=batch.pk), robust=True)
    batch.refresh_from_db()
    logger.info("batch %s cancel requested (%s jobs were active)", batch.pk, len(active))
    return batch


def finalize_publish(*, batch_id: object) -> None:
    from crawls.tasks import finalize_batch

    finalize_batch.apply_async(args=[str(batch_id)])


def batch_jobs_end_lost(*, older_than: float | None = None) -> int:
    """Backstop for a lost worker: end `dead` (worker_lost) the running jobs of open batches whose heartbeat stopped
    long ago, so the batch can complete. The job reaper should have requeued or ended them well before."""
    seconds = settings.TRAWL_BATCH_JOB_LOST_SECONDS if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=seconds)
    stale = CrawlJob.objects.filter(
        batch__isnull=False, batch__finished_at__isnull=True, status=JobStatus.RUNNING, heartbeat_at__lt=cutoff
    )
    ended = 0
    for job in stale.only("id", "attempt"):
        still_stale = CrawlJob.objects.filter(
            pk=job.pk, status=JobStatus.RUNNING, attempt=job.attempt, heartbeat_at__lt=cutoff
        )
        if still_stale.update(
            status=JobStatus.DEAD,
            error_class=ErrorClass.WORKER_LOST,
            error_message=f"no heartbeat for over {seconds:.0f}s: its worker was lost",
            finished_at=timezone.now(),
        ):
            ended += 1
            logger.warning("batch job %s attempt %s lost its worker; ended dead", job.pk, job.attempt)
            dead = CrawlJob.objects.select_related("scraper", "version").get(pk=job.pk)
            job_notify(job=dead)
            job_counted(job=dead)
    return ended


def batches_sweep() -> dict[str, int]:
    """Beat's safety net for batches: end lost jobs, relaunch lost launches, finalize batches whose callback never
    came (hard time limit, lost worker, lost message)."""
    lost = batch_jobs_end_lost()
    launch_cutoff = timezone.now() - timedelta(seconds=settings.TRAWL_BATCH_LAUNCH_GRACE_SECONDS)
    stuck = Batch.objects.filter(status=BatchStatus.PENDING, finished_at__isnull=True, created_at__lt=launch_cutoff)
    relaunched = list(stuck.only("id", "priority")[:100])
    for batch in relaunched:
        logger.warning("batch %s still pending after the launch grace; launching it again", batch.pk)
        batch_launch_publish(batch=batch)
    done = (
        Batch.objects.filter(finished_at__isnull=True)
        .exclude(status=BatchStatus.PENDING)
        .exclude(jobs__status__in=ACTIVE_STATUSES)
    )
    finalized = [batch_id for batch_id in done.values_list("id", flat=True)[:500] if batch_finalize(batch_id=batch_id)]
    if finalized:
        logger.warning("sweeper finalized %s batch(es) whose chord callback had not come", len(finalized))
    return {"lost_jobs": lost, "relaunched": len(relaunched), "finalized": len(finalized)}
