"""Reads: a source's runs (its jobs, newest first)."""

from __future__ import annotations

from django.db.models import QuerySet

from crawls.models import CrawlJob
from sources.models import Source


def source_runs(*, source: Source) -> QuerySet[CrawlJob]:
    """The source's jobs, newest first."""
    return CrawlJob.objects.filter(source=source).order_by("-queued_at", "-pk")
