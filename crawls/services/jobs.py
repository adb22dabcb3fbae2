"""Creating, publishing, claiming, cancelling and finishing crawl jobs."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from access.models import Requester
from crawls.cancel import cancel_request
from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus, Source
from crawls.scheduling import broker_priority
from crawls.services.throttles import throttle_check_url
from project.errors import TrawlError
from project.net import target_check
from registry.models import Scraper, ScraperVersion, Variant
from registry.services import version_rollback_check

logger = logging.getLogger("trawl.jobs")


def validate_crawl_url(url: str, *, field: str = "url") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TrawlError(f"{url!r} is not an http(s) URL with a host", field=field)
    return url


def job_validate(
    *,
    url: str,
    scraper: str = "",
    version: str = "",
    variant: str = "",
    priority: int = 50,
    callback_url: str = "",
    check_blocked: bool = True,
    requester: Requester | None = None,
) -> Scraper:
    """Check a job request against the registry; return the scraper it names. Raises TrawlError naming the field.

    With TRAWL_BLOCK_PRIVATE_TARGETS on, callbacks must be public hosts, and so must crawl URLs of non-admin
    requesters (scheduled sources are admin-made)."""
    validate_crawl_url(url)
    if requester is not None and not requester.is_admin:
        target_check(url, field="url")
    if check_blocked:
        throttle_check_url(url=url)
    if callback_url:
        validate_crawl_url(callback_url, field="callback_url")
        target_check(callback_url, field="callback_url")
    if not 1 <= int(priority) <= 100:
        raise TrawlError(f"priority must be between 1 and 100, got {priority}", field="priority")
    scraper_name = scraper or settings.TRAWL_DEFAULT_SCRAPER
    scraper_obj = Scraper.objects.filter(name=scraper_name).first()
    if scraper_obj is None:
        raise TrawlError(f"no scraper named {scraper_name!r}", field="scraper")
    if (
        version
        and not ScraperVersion.objects.filter(scraper=scraper_obj, version=version, deprecated_at__isnull=True).exists()
    ):
        raise TrawlError(f"scraper {scraper_name!r} has no active version {version!r}", field="version")
    if variant and variant not in Variant.values:
        raise TrawlError(f"variant must be one of {', '.join(Variant.values)}", field="variant")
    return scraper_obj


@transaction.atomic
def job_create(
    *,
    url: str,
    scraper: str = "",
    version: str = "",
    variant: str = "",
    priority: int = 50,
    requester: Requester | None = None,
    callback_url: str = "",
    options: dict[str, Any] | None = None,
    source: Source | None = None,
) -> CrawlJob:
    """Validate a job request, store it queued and publish it once the transaction commits."""
    scraper_obj = job_validate(
        url=url,
        scraper=scraper,
        version=version,
        variant=variant,
        priority=priority,
        callback_url=callback_url,
        # A scheduled source of a blocked domain must not abort the dispatch of every other source: its crawl
        # fails fast instead (the throttle drops its requests).
        check_blocked=source is None,
        requester=requester,
    )
    job = CrawlJob.objects.create(
        url=url,
        scraper=scraper_obj,
        requested_version=version,
        requested_variant=variant,
        priority=priority,
        requester=requester,
        callback_url=callback_url,
        options=options or {},
        source=source,
    )
    transaction.on_commit(lambda: job_publish(job=job))
    return job


def job_publish(*, job: CrawlJob) -> None:
    """Send the job to the crawl queue at its priority. Safe to repeat: the worker's claim dedupes."""
    from crawls.tasks import run_crawl

    run_crawl.apply_async(args=[str(job.id), job.attempt], priority=broker_priority(job.priority))


def job_claim(*, job_id: str, attempt: int, worker: str) -> CrawlJob | None:
    """Compare-and-set queued → running for this attempt, so a redelivered message never runs a job twice."""
    now = timezone.now()
    claimed = CrawlJob.objects.filter(id=job_id, status=JobStatus.QUEUED, attempt=attempt).update(
        status=JobStatus.RUNNING, started_at=now, heartbeat_at=now, worker=worker
    )
    return CrawlJob.objects.select_related("scraper", "source").get(id=job_id) if claimed else None


@transaction.atomic
def job_cancel(*, job: CrawlJob) -> CrawlJob:
    """Queued jobs end now; running ones are asked to stop and end `cancelled` within a few seconds."""
    job = CrawlJob.objects.select_for_update().get(pk=job.pk)
    if job.status not in ACTIVE_STATUSES:
        raise TrawlError(f"job already ended as {job.status}", status_code=409)
    cancel_request(job_id=job.id)
    if job.status == JobStatus.QUEUED:
        job.status, job.error_class, job.error_message = JobStatus.CANCELLED, "cancelled", "cancelled before it started"
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "error_class", "error_message", "finished_at"])
        job_notify(job=job)
        job_counted(job=job)
    return job


def job_finish(
    *, job: CrawlJob, error_class: str, message: str = "", stats: dict[str, Any] | None = None
) -> CrawlJob | None:
    """Record the outcome, if this worker still owns the job (status running, same attempt)."""
    if error_class == "cancelled":
        status = JobStatus.CANCELLED
    else:
        status = JobStatus.FAILED if error_class else JobStatus.SUCCEEDED
    now = timezone.now()
    fields = {"status": status, "error_class": error_class, "error_message": message[:4000], "finished_at": now}
    if stats is not None:
        fields["stats"] = stats
    owned = CrawlJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING, attempt=job.attempt).update(**fields)
    if not owned:
        logger.warning("job %s attempt %s finished but no longer owned; outcome dropped", job.pk, job.attempt)
        return None
    job.refresh_from_db()
    job_ended(job=job)
    return job


def job_ended(*, job: CrawlJob) -> None:
    """What follows a final state set by a worker or the reaper: source schedule, rollback check, webhook, counters."""
    if job.source_id:
        _source_feedback(job)
    version_rollback_check(version_id=job.version_id)
    job_notify(job=job)
    job_counted(job=job)


def job_notify(*, job: CrawlJob) -> None:
    """Queue `job.completed` / `job.failed` for a job with a callback URL, once its final state is committed."""
    if job.callback_url:
        from callbacks.services import job_event_emit

        # robust: a webhook that cannot be queued must never fail the job itself.
        transaction.on_commit(lambda: job_event_emit(job=job), robust=True)


def job_counted(*, job: CrawlJob) -> None:
    """Log the job's finish line and add it to the ops counters (/api/stats/, /metrics) once committed."""
    from ops.services import job_finished_record

    job_finished_record(job=job)


def _source_feedback(job: CrawlJob) -> None:
    from crawls.services.sources import source_job_feedback  # sources imports this module

    source_job_feedback(job=job)
