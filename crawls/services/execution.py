"""Running one claimed job: route the version, crawl, upsert items as they arrive, record the outcome."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from crawls.cancel import cancel_requested
from crawls.models import CrawlJob, JobStatus
from crawls.scraping.outcome import classify, job_stats
from crawls.scraping.runner import CrawlSession, live_stats, run_spider
from crawls.scraping.settings import crawl_settings, trawl_setting
from crawls.services.items import item_fingerprint, items_upsert
from crawls.services.jobs import job_claim, job_finish
from project.errors import TrawlError
from registry.services import version_route
from registry.spiders import spider_load

logger = logging.getLogger("trawl.jobs")


class JobTracker:
    """Called every tick from the task thread: upserts new items, heartbeats, and notices cancel or lost ownership."""

    def __init__(self, job: CrawlJob) -> None:
        self.job = job
        self.counts: Counter = Counter()
        self.seen: set[str] = set()
        self.heartbeat_every = settings.TRAWL_HEARTBEAT_SECONDS
        self.last_beat = time.monotonic()

    def __call__(self, session: CrawlSession) -> str:
        self.flush(session, limit=settings.TRAWL_ITEM_CHUNK)
        if time.monotonic() - self.last_beat < self.heartbeat_every:
            return ""
        self.last_beat = time.monotonic()
        if cancel_requested(job_id=self.job.id):
            return "cancelled"
        progress = {**job_stats(live_stats(session)), **self.item_counts()}
        beat = CrawlJob.objects.filter(pk=self.job.pk, status=JobStatus.RUNNING, attempt=self.job.attempt)
        if not beat.update(heartbeat_at=timezone.now(), stats=progress):
            return "lost"
        return ""

    def flush(self, session: CrawlSession, *, limit: int | None = None) -> None:
        while True:
            batch = session.drain(limit or settings.TRAWL_ITEM_CHUNK)
            # The same item seen twice in one crawl counts once.
            fresh = [data for data in batch if self._first_sighting(data)]
            if fresh:
                self.counts.update(items_upsert(job=self.job, items=fresh))
            if limit is not None or not batch:
                return

    def _first_sighting(self, data: dict[str, Any]) -> bool:
        fingerprint = item_fingerprint(data)
        if fingerprint in self.seen:
            return False
        self.seen.add(fingerprint)
        return True

    def item_counts(self) -> dict[str, int]:
        return {f"items_{change}": self.counts.get(change, 0) for change in ("new", "changed", "unchanged")} | {
            "items": sum(self.counts.values())
        }


def job_execute(*, job_id: str, attempt: int, worker: str) -> dict[str, Any]:
    """Run a job end to end. Crawl failures are returned in the result, never raised (chords must complete)."""
    job = job_claim(job_id=job_id, attempt=attempt, worker=worker)
    if job is None:
        current = CrawlJob.objects.filter(pk=job_id).values_list("status", flat=True).first()
        logger.info("job %s attempt %s not claimed (status %s)", job_id, attempt, current)
        return {"job_id": str(job_id), "status": current or "missing", "claimed": False}
    if cancel_requested(job_id=job.id):
        return _result(job_finish(job=job, error_class="cancelled", message="cancelled before it started") or job)
    try:
        version = version_route(
            scraper=job.scraper, version=job.requested_version, variant=job.requested_variant, priority=job.priority
        )
        spider_cls = spider_load(version.spider)
    except TrawlError as exc:
        return _result(job_finish(job=job, error_class="routing", message=exc.message) or job)
    CrawlJob.objects.filter(pk=job.pk).update(version=version)
    job.version = version
    scrapy_settings = crawl_settings(job=job, version=version)
    domain = urlsplit(job.url).hostname
    logger.info("job start id=%s version=%s domain=%s attempt=%s worker=%s", job.pk, version, domain, attempt, worker)
    tracker = JobTracker(job)
    crawl, session = run_spider(
        spider_cls=spider_cls,
        settings=scrapy_settings,
        spider_kwargs=_spider_kwargs(job),
        timeout=float(trawl_setting(scrapy_settings, "TRAWL_JOB_TIMEOUT", settings.TRAWL_JOB_TIMEOUT)),
        on_tick=tracker,
    )
    tracker.flush(session)
    stats = {**job_stats(crawl.stats), **tracker.item_counts()}
    verdict = classify(
        stats=stats,
        stopped_because=crawl.stopped_because,
        crawl_error=crawl.crawl_error,
        first_spider_error=crawl.first_spider_error,
        max_spider_errors=int(trawl_setting(scrapy_settings, "TRAWL_MAX_SPIDER_ERRORS", 0)),
    )
    finished = job_finish(job=job, error_class=verdict.error_class, message=verdict.message, stats=stats) or job
    logger.info(
        "job finish id=%s version=%s domain=%s outcome=%s error_class=%s duration=%.1fs pages=%s items=%s",
        job.pk,
        version,
        domain,
        finished.status,
        verdict.error_class or "-",
        finished.duration or 0.0,
        stats.get("pages"),
        stats.get("items"),
    )
    return _result(finished)


def _spider_kwargs(job: CrawlJob) -> dict[str, Any]:
    """Every spider gets the job's URL as `url` and `start_urls`, plus `options` and the merged source `config`."""
    config = dict(job.source.config) if job.source_id else {}
    config.update((job.options or {}).get("config") or {})
    return {"url": job.url, "start_urls": [job.url], "options": job.options or {}, "config": config}


def _result(job: CrawlJob) -> dict[str, Any]:
    return {"job_id": str(job.pk), "status": job.status, "error_class": job.error_class, "stats": job.stats}
