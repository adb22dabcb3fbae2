"""The JSON bodies of webhook events, per the contract in docs/architecture.md. Built once, stored, resent unchanged."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.conf import settings

from callbacks.models import EventType
from crawls.models import Batch, CrawlJob, JobStatus


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def envelope(*, event_id: object, event: str, created_at: datetime, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": str(event_id), "event": event, "created_at": _time(created_at), "data": data}


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
        "queued_at": _time(job.queued_at),
        "started_at": _time(job.started_at),
        "finished_at": _time(job.finished_at),
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
        "created_at": _time(batch.created_at),
        "finished_at": _time(batch.finished_at),
        "jobs": [
            {"id": str(job_id), "url": url, "status": status, "error_class": error_class}
            for job_id, url, status, error_class in jobs
        ],
    }


def body_bytes(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent and signed. Deterministic, so every retry carries the same body."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
