"""Creating, claiming and cancelling crawl jobs. Ending them is crawls.services.ending's."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from access.models import Requester
from crawls.cancel import cancel_request
from crawls.fairshare import PICK_ATTEMPTS, fair_enabled, fair_pick, fair_served, jobs_admit
from crawls.models import ACTIVE_STATUSES, CrawlJob, ErrorClass, JobStatus
from crawls.publish import publish_crawl
from crawls.scraping.inputs import options_check
from crawls.scraping.patterns import PatternError
from crawls.services.ending import job_end
from project.errors import TrawlError
from project.net import target_check
from registry.models import Scraper, ScraperVersion, Variant
from sources.models import Source
from throttling.services import throttle_check_url

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
    parallelism: int = 1,
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
    limit = settings.TRAWL_MAX_PARALLELISM
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or not 1 <= parallelism <= limit:
        message = f"parallelism must be an integer between 1 and {limit}, got {parallelism!r}"
        raise TrawlError(message, field="parallelism")
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
    if (
        variant
        and not version
        and not ScraperVersion.objects.filter(scraper=scraper_obj, variant=variant, deprecated_at__isnull=True).exists()
    ):
        # Refused now, like an unknown version: accepting it would only fail the job later with `routing`.
        raise TrawlError(f"scraper {scraper_name!r} has no active {variant!r} version", field="variant")
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
    parallelism: int = 1,
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
        parallelism=parallelism,
    )
    job_options_validate(options)
    jobs_admit(requester=requester, shards=parallelism)
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
        parallelism=parallelism,
    )
    transaction.on_commit(lambda: publish_crawl(job=job))
    return job


def job_options_validate(options: Any) -> None:
    """A job's options as its spider will run them: regexes on RE2 (linear time), selectors without extension
    functions (crawls/scraping/inputs.py, which the spiders use too). Raises TrawlError naming `options` and the key."""
    try:
        options_check(options)
    except PatternError as exc:
        raise TrawlError(str(exc), field="options") from None


def job_claim(*, job_id: str, attempt: int, worker: str) -> CrawlJob | None:
    """Compare-and-set queued → running for this attempt, so a redelivered message never runs a job twice."""
    now = timezone.now()
    claimed = CrawlJob.objects.filter(id=job_id, status=JobStatus.QUEUED, attempt=attempt).update(
        status=JobStatus.RUNNING, started_at=now, heartbeat_at=now, worker=worker
    )
    return CrawlJob.objects.select_related("scraper", "source").get(id=job_id) if claimed else None


def job_claim_fair(*, job_id: str, attempt: int, worker: str, slot_soft_limit: float | None = None) -> CrawlJob | None:
    """Claim the job this message's slot owes a turn to (crawls/fairshare.py), else the message's own job.

    `slot_soft_limit` is the message's Celery soft time limit: only a job whose timeout it covers may take the slot."""
    own = CrawlJob.objects.filter(pk=job_id).first()
    if own is None or not fair_enabled():
        return job_claim(job_id=job_id, attempt=attempt, worker=worker)
    try:
        for _ in range(PICK_ATTEMPTS):
            mine = own if own.attempt == attempt else None
            pick = fair_pick(priority=own.priority, own=mine, slot_soft_limit=slot_soft_limit)
            if pick is None:
                break
            claimed = job_claim(job_id=str(pick.pk), attempt=pick.attempt, worker=worker)
            if claimed is not None:
                fair_served(job=claimed)
                if claimed.pk != own.pk:
                    logger.info(
                        "fair share: the slot of job %s runs job %s (requester %s)", own.pk, pick.pk, pick.requester_id
                    )
                return claimed
            own.refresh_from_db()  # another worker took our pick: ask again
    except redis.RedisError as exc:  # the turn order lives in Redis; without it, plain submission order
        logger.warning("fair share unavailable (%s): job %s takes its own slot", exc, job_id)
    return job_claim(job_id=job_id, attempt=attempt, worker=worker)


def job_requeue_infrastructure(*, job: CrawlJob, reason: str) -> CrawlJob | None:
    """Put a running job back in the queue because Trawl's own Redis or database failed under it, not the site.

    A new attempt (the old message can no longer claim it) that does not count against the job's attempts; no error
    class, no source feedback. If the broker is still away the publish is skipped: the reaper publishes queued
    jobs again (at once when Redis came back empty). None if the job was no longer this attempt's."""
    moved = CrawlJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING, attempt=job.attempt).update(
        status=JobStatus.QUEUED,
        attempt=job.attempt + 1,
        max_attempts=job.max_attempts + 1,
        worker="",
        heartbeat_at=None,
    )
    if not moved:
        return None
    logger.warning("job %s attempt %s requeued: Trawl's infrastructure failed (%s)", job.pk, job.attempt, reason)
    requeued = CrawlJob.objects.select_related("scraper", "version").get(pk=job.pk)
    try:
        publish_crawl(job=requeued)
    except Exception as exc:  # the broker is what failed: the reaper republishes queued jobs
        logger.warning("job %s: requeue not published (%s); the reaper will", job.pk, exc)
    return requeued


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
