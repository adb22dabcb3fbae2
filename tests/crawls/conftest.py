from __future__ import annotations

import pytest
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from registry.models import Scraper


@pytest.fixture
def running_job(requester, builtins):
    """A job of the `link` scraper in the middle of its first attempt, as a worker's claim leaves it."""
    now = timezone.now()
    return CrawlJob.objects.create(
        url="http://shop.test/",
        scraper=Scraper.objects.get(name="link"),
        requester=requester,
        status=JobStatus.RUNNING,
        started_at=now,
        heartbeat_at=now,
    )
