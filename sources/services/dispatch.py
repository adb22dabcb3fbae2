"""Dispatching: one pass books every due source and publishes its job, what beat runs every minute."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from crawls.models import ACTIVE_STATUSES, CrawlJob
from crawls.publish import publish_crawls
from project.lease import Lease
from sources.models import Source, validate_timezone
from sources.scheduling import Window

logger = logging.getLogger("trawl.scheduling")

DISPATCH_LEASE = "dispatch-due-sources"


def source_window(source: Source) -> Window | None:
    """The source's crawl window, else its scraper's (`TRAWL_CRAWL_WINDOW` in the scraper's settings), else none."""
    start, end, zone = source.window_start_hour, source.window_end_hour, source.timezone
    if start is None or end is None:
        spec = (source.scraper.settings or {}).get("TRAWL_CRAWL_WINDOW") or {}
        start, end, zone = spec.get("start_hour"), spec.get("end_hour"), spec.get("timezone") or "UTC"
    if start is None or end is None:
        return None
    try:
        validate_timezone(zone)
    except ValidationError:
        logger.warning("source %s: unknown timezone %r, its crawl window is read in UTC", source.pk, zone)
        zone = "UTC"
    return Window(int(start), int(end), zone)


def sources_dispatch_due(
    *, now: datetime | None = None, limit: int | None = None, lease: bool = True
) -> list[CrawlJob]:
    """One dispatch pass, what beat runs every minute: book every due source and publish its job.

    The Redis lease makes a second beat, or a manual run during a beat run, return at once with nothing to do. What
    guarantees that no source is dispatched twice is the booking: `next_sync_at` moves forward in the transaction
    that selects the rows (SKIP LOCKED on PostgreSQL, one writer at a time on SQLite), lease or not. Sources are
    booked in chunks, each its own transaction whose jobs are published as it commits.
    """
    held = Lease(DISPATCH_LEASE, seconds=settings.TRAWL_SCHEDULING_LEASE_SECONDS) if lease else None
    if held is not None and not held.acquire():
        logger.info("dispatch skipped: another dispatcher holds the lease")
        return []
    limit = settings.TRAWL_SCHEDULING_DISPATCH_MAX if limit is None else limit
    jobs: list[CrawlJob] = []
    deferred = 0
    try:
        while len(jobs) + deferred < limit:
            size = min(settings.TRAWL_SCHEDULING_DISPATCH_CHUNK, limit - len(jobs) - deferred)
            booked, waiting = sources_book_due(now=now or timezone.now(), limit=size)
            jobs += booked
            deferred += waiting
            if len(booked) + waiting < size:
                break
            if held is not None and not held.renew():
                logger.warning("dispatch lease expired mid-pass; the next pass books the rest")
                break
    finally:
        if held is not None:
            held.release()
    logger.info("dispatch: %s job(s) published, %s source(s) wait for their crawl window", len(jobs), deferred)
    return jobs


def _due(now: datetime) -> QuerySet[Source]:
    busy = CrawlJob.objects.filter(source=OuterRef("pk"), status__in=ACTIVE_STATUSES)
    due = (
        Source.objects.select_related("scraper")
        .filter(enabled=True, next_sync_at__lte=now)
        .filter(~Exists(busy))
        .order_by("-priority", "next_sync_at", "pk")
    )
    if connection.features.has_select_for_update_skip_locked:
        due = due.select_for_update(skip_locked=True, of=("self",))
    return due


@transaction.atomic
def sources_book_due(*, now: datetime, limit: int) -> tuple[list[CrawlJob], int]:
    """Book up to `limit` due sources in one transaction: a job for each inside its crawl window (published on
    commit), the next opening of the window for the others. Returns the jobs and how many sources wait."""
    sources = list(_due(now)[:limit])
    jobs: list[CrawlJob] = []
    for source in sources:
        window = source_window(source)
        opens = window.next_open(now) if window else now
        if opens > now:
            source.next_sync_at = opens
            source.schedule_note = f"outside its crawl window ({window.timezone}); it opens {opens:%Y-%m-%d %H:%M} UTC"
            continue
        # A placeholder until the job ends and plans the real next run; it keeps the source booked meanwhile.
        source.next_sync_at = now + timedelta(seconds=source.current_interval)
        source.schedule_note = f"dispatched {now:%Y-%m-%d %H:%M} UTC; the next run is planned when its job ends"
        jobs.append(CrawlJob(url=source.url, scraper_id=source.scraper_id, priority=source.priority, source=source))
    _book(sources)
    CrawlJob.objects.bulk_create(jobs)
    transaction.on_commit(lambda: _publish(jobs))
    return jobs, len(sources) - len(jobs)


def _book(sources: list[Source]) -> None:
    """One UPDATE per distinct (next run, note): sources share a few intervals, and bulk_update's CASE per row is
    far slower."""
    groups: dict[tuple[datetime, str], list[int]] = defaultdict(list)
    for source in sources:
        groups[(source.next_sync_at, source.schedule_note)].append(source.pk)
    for (next_sync_at, note), ids in groups.items():
        Source.objects.filter(pk__in=ids).update(next_sync_at=next_sync_at, schedule_note=note)


def _publish(jobs: list[CrawlJob]) -> None:
    # A publish that fails leaves its job queued in the database, where the reaper publishes it again.
    publish_crawls(jobs=jobs)
