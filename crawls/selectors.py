"""Reads over jobs and items."""

from __future__ import annotations

from django.db.models import QuerySet

from access.models import Requester
from crawls.models import CrawlJob, ItemSighting


def jobs_visible(*, requester: Requester) -> QuerySet[CrawlJob]:
    """Admins see every job; a requester only its own (others' are simply not found)."""
    jobs = CrawlJob.objects.select_related("scraper", "version").order_by("-queued_at")
    return jobs if requester.is_admin else jobs.filter(requester=requester)


def job_items(*, job: CrawlJob) -> QuerySet[ItemSighting]:
    return ItemSighting.objects.filter(job=job).select_related("item").order_by("item_id")
