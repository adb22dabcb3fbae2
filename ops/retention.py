"""Retention: finished jobs older than TRAWL_RETENTION_DAYS go, with their logs, sightings, deliveries and the field
changes they recorded.

Items stay (their `last_job` becomes empty), and so does each source's last finished job, which its schedule,
monitors and run history compare against.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from callbacks.models import Delivery
from crawls.logs.joblog import job_log_forget
from crawls.models import ACTIVE_STATUSES, CrawlJob, JobLog
from items.models import ItemFieldChange, ItemSighting

logger = logging.getLogger("trawl.retention")


def jobs_expired(*, days: float) -> QuerySet[CrawlJob]:
    """Ended jobs that finished more than `days` ago, except each source's last finished job."""
    cutoff = timezone.now() - timedelta(days=days)
    later_run = CrawlJob.objects.filter(
        source_id=OuterRef("source_id"), finished_at__gt=OuterRef("finished_at")
    ).exclude(status__in=ACTIVE_STATUSES)
    ended = CrawlJob.objects.exclude(status__in=ACTIVE_STATUSES).filter(finished_at__lt=cutoff)
    return ended.filter(Q(source__isnull=True) | Exists(later_run)).order_by("finished_at", "pk")


def _counts(job_ids: list) -> Counter:
    return Counter(
        jobs=len(job_ids),
        logs=JobLog.objects.filter(job_id__in=job_ids).count(),
        sightings=ItemSighting.objects.filter(job_id__in=job_ids).count(),
        deliveries=Delivery.objects.filter(job_id__in=job_ids).count(),
        # Field changes the jobs recorded go with them: an item's history is bounded by its retention too.
        field_changes=ItemFieldChange.objects.filter(job_id__in=job_ids).count(),
    )


def jobs_cleanup(
    *,
    days: float | None = None,
    dry_run: bool = False,
    chunk: int | None = None,
    on_job: Callable[[CrawlJob], None] | None = None,
) -> dict[str, int]:
    """Delete expired jobs chunk by chunk (one short transaction each); with `dry_run`, only count them.

    Returns what went (or would go): jobs, logs, sightings, deliveries, field changes. `on_job` sees each job before
    it goes.
    """
    days = settings.TRAWL_RETENTION_DAYS if days is None else days
    chunk = chunk or settings.TRAWL_RETENTION_CHUNK
    total: Counter = Counter(jobs=0, logs=0, sightings=0, deliveries=0, field_changes=0)
    expired = jobs_expired(days=days)
    offset = 0
    while True:
        # A dry run deletes nothing, so it pages through; a real run always takes the oldest chunk left.
        jobs = list(expired.select_related("scraper")[offset : offset + chunk] if dry_run else expired[:chunk])
        if not jobs:
            break
        ids = [job.pk for job in jobs]
        attempts = [(job.pk, job.attempt) for job in jobs]
        if on_job is not None:
            for job in jobs:
                on_job(job)
        total.update(_counts(ids))
        if dry_run:
            offset += chunk
            continue
        _delete(ids, attempts)
    if total["jobs"] and not dry_run:
        logger.info("retention (%s days) removed %s", days, ", ".join(f"{n} {kind}" for kind, n in total.items()))
    return dict(total)


def _delete(ids: list, attempts: list[tuple[object, int]]) -> None:
    with transaction.atomic():
        # Deliveries only lose their job on delete (SET_NULL): they go explicitly, their attempts cascade.
        Delivery.objects.filter(job_id__in=ids).delete()
        CrawlJob.objects.filter(pk__in=ids).delete()  # sightings, field changes and stored logs cascade; items stay
    job_log_forget(jobs=attempts)
