"""Reads: sources as the API lists them, and a source's runs (its jobs, newest first)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from crawls.models import CrawlJob
from crawls.selectors import jobs_of_source
from sources.models import Source


def sources_listed(
    *,
    kind: str | None = None,
    scraper_name: str | None = None,
    parent_id: str | int | None = None,
    enabled: bool | None = None,
    due: bool = False,
) -> QuerySet[Source]:
    """Sources, the next due first, narrowed by whichever filters are given (`due`: enabled and due now)."""
    sources = Source.objects.select_related("scraper").order_by("next_sync_at", "id")
    for lookup, value in (("kind", kind), ("scraper__name", scraper_name), ("parent_id", parent_id)):
        if value:
            sources = sources.filter(**{lookup: value})
    if enabled is not None:
        sources = sources.filter(enabled=enabled)
    if due:
        sources = sources.filter(enabled=True, next_sync_at__lte=timezone.now())
    return sources


def source_runs(*, source: Source) -> QuerySet[CrawlJob]:
    """The source's jobs, newest first."""
    return jobs_of_source(source_id=source.pk)
