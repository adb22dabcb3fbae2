"""Writes: what a finished job adds to the counters, its finish log line, and the queue/worker samples beat takes."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from django.utils import timezone

from access.tenancy import job_tenant_id
from crawls.models import CrawlJob
from ops.queues import queue_sample_store
from ops.stats import job_dimensions, job_numbers, stats_record, throttle_numbers, version_label
from ops.workers import workers_live

logger = logging.getLogger("trawl.jobs")


def job_finished_record(*, job: CrawlJob) -> None:
    """Log the job's finish line and add it to the counters (a follow-up of crawls.services.after_end: the final state
    is committed already). Never raises: a Redis hiccup may cost a counter, never a job's outcome."""
    domain = urlsplit(job.url).hostname or "-"
    version = job.version.version if job.version_id else None
    _log_finish(job, domain=domain, version=version_label(job.scraper.name, version))
    numbers = job_numbers(
        status=job.status, error_class=job.error_class, stats=job.stats, duration=job.duration, alerts=job.alerts
    )
    try:
        tenant = job_tenant_id(requester_id=job.requester_id)
        dimensions = job_dimensions(domain=domain, scraper=job.scraper.name, version=version, tenant=tenant)
        at = (job.finished_at or timezone.now()).timestamp()
        stats_record(at=at, dimensions=dimensions, numbers=numbers, duration=job.duration)
    except Exception as exc:  # Redis down or slow: the outcome is stored already; say which numbers were lost
        logger.warning("job %s not counted in the stats: %s: %s", job.pk, type(exc).__name__, exc)


def _log_finish(job: CrawlJob, *, domain: str, version: str) -> None:
    """One key=value line per ended job, the counterpart of execution's `job start` line."""
    stats = job.stats or {}
    logger.info(
        "job finish id=%s version=%s domain=%s outcome=%s error_class=%s duration=%s pages=%s items_new=%s "
        "items_changed=%s throttle_wait_seconds=%s attempt=%s worker=%s",
        job.pk,
        version,
        domain,
        job.status,
        job.error_class or "-",
        "-" if job.duration is None else f"{job.duration:.3f}",
        stats.get("pages", 0),
        stats.get("items_new", 0),
        stats.get("items_changed", 0),
        throttle_numbers(stats)["wait_seconds"],
        job.attempt,
        job.worker or "-",
    )


def ops_sample() -> dict:
    """Beat's sample: queue depths (kept for the dashboard's chart) and how many workers are alive."""
    depths = queue_sample_store()
    workers = workers_live()
    return {"queued": sum(q["total"] for q in depths["queues"].values()), "workers": len(workers)}
