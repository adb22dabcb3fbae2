"""Booking due sources and turning them into crawl jobs."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from crawls.models import ACTIVE_STATUSES, CrawlJob, Source
from crawls.services.jobs import job_create


@transaction.atomic
def sources_dispatch_due(*, now: datetime | None = None, limit: int = 200) -> list[CrawlJob]:
    """Book every due source (move `next_sync_at` forward) and create its job, in one transaction.

    Rows are locked with SKIP LOCKED where the database has it, so two dispatchers never book the same source.
    A source whose previous job is still queued or running waits for it.
    """
    now = now or timezone.now()
    due = (
        Source.objects.select_related("scraper")
        .filter(enabled=True, next_sync_at__lte=now)
        .exclude(jobs__status__in=ACTIVE_STATUSES)
        .order_by("-priority", "next_sync_at")
    )
    if connection.features.has_select_for_update_skip_locked:
        due = due.select_for_update(skip_locked=True, of=("self",))
    jobs = []
    for source in due[:limit]:
        source.next_sync_at = now + timedelta(seconds=source.current_interval)
        source.save(update_fields=["next_sync_at", "updated_at"])
        jobs.append(job_create(url=source.url, scraper=source.scraper.name, priority=source.priority, source=source))
    return jobs


def source_crawl_now(*, source: Source) -> CrawlJob:
    return job_create(url=source.url, scraper=source.scraper.name, priority=source.priority, source=source)
