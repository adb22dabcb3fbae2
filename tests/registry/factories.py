"""Scrapers, versions and finished jobs for registry tests, written straight to the database."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from registry.models import Scraper, ScraperVersion

LINK_SPIDER = "runtime.spiders.link.LinkSpider"
RAISING_SPIDER = "tests.fixtures.spiders.RaisingSpider"


def make_scraper(name: str = "shop", **fields) -> Scraper:
    return Scraper.objects.create(name=name, **fields)


def make_version(scraper: Scraper, version: str, **fields) -> ScraperVersion:
    return ScraperVersion.objects.create(
        scraper=scraper, version=version, spider=fields.pop("spider", LINK_SPIDER), **fields
    )


def make_job(
    version: ScraperVersion,
    *,
    status: str = JobStatus.SUCCEEDED,
    error_class: str = "",
    items: int = 0,
    seconds: float = 1.0,
    ended_ago: timedelta = timedelta(0),
) -> CrawlJob:
    """A job of `version` that ended `ended_ago`, having run `seconds`."""
    finished = timezone.now() - ended_ago
    if status in (JobStatus.FAILED, JobStatus.DEAD) and not error_class:
        error_class = "spider_error" if status == JobStatus.FAILED else "worker_lost"
    return CrawlJob.objects.create(
        url="http://shop.test/p",
        scraper=version.scraper,
        version=version,
        status=status,
        error_class=error_class,
        stats={"items": items, "pages": 1},
        started_at=finished - timedelta(seconds=seconds),
        finished_at=finished,
    )
