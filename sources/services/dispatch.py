"""Dispatching: one pass books every due source and publishes its job, what beat runs every minute."""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from crawls.models import ACTIVE_STATUSES, CrawlJob
from crawls.services.lifecycle import jobs_create_many
from project.redis.lease import Lease
from sources.models import Source
from sources.windows import source_cron_next, source_window

logger = logging.getLogger("trawl.scheduling")

DISPATCH_LEASE = "dispatch-due-sources"
BUSY_LISTED_MAX = 5_000  # due sources still crawling that a pass leaves out by id (each a parameter of its SELECTs)


def sources_dispatch_due(*, now: datetime | None = None, limit: int | None = None, lease: bool = True) -> int:
    """One dispatch pass, what beat runs every minute: book every due source and publish its job; return how many
    jobs it published (a count, not the jobs: a pass of 100,000 keeps one chunk's jobs in memory at a time).

    The Redis lease makes a second beat, or a manual run during a beat run, return at once with nothing to do. What
    guarantees that no source is dispatched twice is the booking: `next_sync_at` moves forward in the transaction
    that selects the rows (SKIP LOCKED on PostgreSQL, one writer at a time on SQLite), lease or not. Sources are
    booked in chunks, each its own transaction whose jobs are published as it commits.
    """
    held = Lease(DISPATCH_LEASE, seconds=settings.TRAWL_SCHEDULING_LEASE_SECONDS) if lease else None
    if held is not None and not held.acquire():
        logger.info("dispatch skipped: another dispatcher holds the lease")
        return 0
    limit = settings.TRAWL_SCHEDULING_DISPATCH_MAX if limit is None else limit
    now = now or timezone.now()
    published = deferred = 0
    try:
        busy = _busy(now)
        while published + deferred < limit:
            size = min(settings.TRAWL_SCHEDULING_DISPATCH_CHUNK, limit - published - deferred)
            booked, waiting = sources_book_due(now=now, limit=size, busy=busy)
            published += booked
            deferred += waiting
            if booked + waiting < size:
                break
            if held is not None and not held.renew():
                logger.warning("dispatch lease expired mid-pass; the next pass books the rest")
                break
    finally:
        if held is not None:
            held.release()
    logger.info("dispatch: %s job(s) published, %s source(s) wait for their crawl window", published, deferred)
    return published


def _busy(now: datetime) -> list[int] | QuerySet:
    """The due sources whose last job is still queued or running, read once per pass: a source booked by the pass
    leaves the due range, so no source can turn busy and still be due during it (a crawl-now books its source too).
    Their ids, or when there are very many, the query itself. (A NOT EXISTS in every chunk's SELECT is planned, on
    the row counts PostgreSQL has before the pass, as a scan of every active job per due source: quadratic in a pass
    that creates 100,000 jobs.)"""
    active = CrawlJob.objects.filter(status__in=ACTIVE_STATUSES, source__enabled=True, source__next_sync_at__lte=now)
    ids = active.order_by().values_list("source_id", flat=True).distinct()
    listed = list(ids[: BUSY_LISTED_MAX + 1])
    return listed if len(listed) <= BUSY_LISTED_MAX else ids


def _due(now: datetime, busy: list[int] | QuerySet) -> QuerySet[Source]:
    due = Source.objects.select_related("scraper").filter(enabled=True, next_sync_at__lte=now)
    due = due.exclude(pk__in=busy).order_by("-priority", "next_sync_at", "pk")
    if connection.features.has_select_for_update_skip_locked:
        due = due.select_for_update(skip_locked=True, of=("self",))
    return due


@transaction.atomic
def sources_book_due(*, now: datetime, limit: int, busy: list[int] | QuerySet = ()) -> tuple[int, int]:
    """Book up to `limit` due sources, but the `busy` ones, in one transaction: a job for each inside its crawl
    window (created, checked and published on commit by crawls.services.lifecycle.jobs_create_many), the next opening
    of the window for the others. Returns how many jobs were created and how many sources wait."""
    sources = list(_due(now, busy)[:limit])
    dispatched: list[Source] = []
    for source in sources:
        window = source_window(source)
        opens = window.next_open(now) if window else now
        cron = source_cron_next(source, after=now)
        if opens > now:
            source.next_sync_at = cron or opens
            source.schedule_note = f"outside its crawl window ({window.timezone}); it opens {opens:%Y-%m-%d %H:%M} UTC"
            continue
        # A placeholder until the job ends and plans the real next run; it keeps the source booked meanwhile. A cron
        # source's is its next minute: if its job still runs then, that minute is skipped (never two at once).
        source.next_sync_at = cron or now + timedelta(seconds=source.current_interval)
        source.schedule_note = f"dispatched {now:%Y-%m-%d %H:%M} UTC; the next run is planned when its job ends"
        dispatched.append(source)
    # A deployed project's spider by its name: the source's config says which (`{"spider": "books"}`).
    specs = [
        {
            "url": source.url,
            "spider": (source.config or {}).get("spider") or "",
            "scraper": source.scraper.name,
            "priority": source.priority,
            "args": source.args,
            "source": source,
        }
        for source in dispatched
    ]
    # A source whose job request is invalid gets no job (logged); the others are not held back by it.
    jobs = jobs_create_many(specs=specs, skip_invalid=True)
    with_job = {job.source_id for job in jobs}
    for source in dispatched:
        if source.pk not in with_job:
            source.schedule_note = f"not dispatched {now:%Y-%m-%d %H:%M} UTC: its job request is invalid (see the log)"
    _book(sources)
    return len(jobs), len(sources) - len(dispatched)


def _book(sources: list[Source]) -> None:
    """One UPDATE per distinct (next run, note): sources share a few intervals, and bulk_update's CASE per row is
    far slower."""
    groups: dict[tuple[datetime, str], list[int]] = defaultdict(list)
    for source in sources:
        groups[(source.next_sync_at, source.schedule_note)].append(source.pk)
    for (next_sync_at, note), ids in groups.items():
        Source.objects.filter(pk__in=ids).update(next_sync_at=next_sync_at, schedule_note=note)
