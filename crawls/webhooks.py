"""What a webhook says about a job or a batch: crawls owns both, so it builds their event data and hands it to
callbacks, which stores, signs and delivers it (callbacks never reads crawls' models)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from callbacks.models import Delivery, EventType
from callbacks.payloads import iso_time
from callbacks.services import event_emit
from crawls.models import Batch, CrawlJob, JobStatus


def job_event_type(job: CrawlJob) -> str:
    """`job.completed` for a job that succeeded; `job.failed` for every other final state (failed, dead, cancelled)."""
    return EventType.JOB_COMPLETED if job.status == JobStatus.SUCCEEDED else EventType.JOB_FAILED


def job_data(job: CrawlJob) -> dict[str, Any]:
    base = settings.TRAWL_WEBHOOK_LINK_BASE_URL.rstrip("/")
    return {
        "id": str(job.pk),
        "url": job.url,
        "status": job.status,
        "attempt": job.attempt,
        "scraper": job.scraper.name,
        "version": job.version.version if job.version_id else None,
        "stats": job.stats or {},
        "error_class": job.error_class,
        "error": job.error_message,
        "items_url": f"{base}/api/jobs/{job.pk}/items/",
        "log_url": f"{base}/api/jobs/{job.pk}/log/",
        "batch_id": str(job.batch_id) if job.batch_id else None,
        "queued_at": iso_time(job.queued_at),
        "started_at": iso_time(job.started_at),
        "finished_at": iso_time(job.finished_at),
    }


def batch_data(batch: Batch) -> dict[str, Any]:
    """The batch's totals and every job's id, status and error class (enough to fetch details of the failures)."""
    jobs = batch.jobs.order_by("queued_at", "id").values_list("id", "url", "status", "error_class")
    return {
        "id": str(batch.pk),
        "name": batch.name,
        "status": batch.status,
        "priority": batch.priority,
        "total": batch.total,
        "totals": batch.totals,
        "created_at": iso_time(batch.created_at),
        "finished_at": iso_time(batch.finished_at),
        "jobs": [
            {"id": str(job_id), "url": url, "status": status, "error_class": error_class}
            for job_id, url, status, error_class in jobs
        ],
    }


def job_event_emit(*, job: CrawlJob) -> Delivery | None:
    job = CrawlJob.objects.select_related("scraper", "version").get(pk=job.pk)
    return event_emit(
        event=job_event_type(job),
        dedupe_key=f"job:{job.pk}",
        target_url=job.callback_url,
        data=job_data(job),
        requester_id=job.requester_id,
        job_id=job.pk,
    )


def batch_event_emit(*, batch: Batch) -> Delivery | None:
    return event_emit(
        event=EventType.BATCH_COMPLETED,
        dedupe_key=f"batch:{batch.pk}",
        target_url=batch.callback_url,
        data=batch_data(batch),
        requester_id=batch.requester_id,
        batch_id=batch.pk,
    )
