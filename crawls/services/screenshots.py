"""Storing the screenshots a rendered crawl took (runtime/rendering/screenshots.py) with its job."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings

from crawls.models import CrawlJob, JobScreenshot
from runtime.rendering.screenshots import Screenshot


def job_screenshots_store(*, job: CrawlJob, taken: list[Screenshot]) -> int:
    """Keep what fits under TRAWL_RENDER_SCREENSHOTS_MAX for the job (its attempts and shards together)."""
    room = settings.TRAWL_RENDER_SCREENSHOTS_MAX - JobScreenshot.objects.filter(job=job).count()
    rows = [
        JobScreenshot(
            job=job,
            url=shot.url[:2000],
            reason=shot.reason,
            image=shot.image,
            taken_at=datetime.fromtimestamp(shot.taken_at, tz=UTC),
        )
        for shot in taken[: max(0, room)]
    ]
    JobScreenshot.objects.bulk_create(rows)
    return len(rows)
