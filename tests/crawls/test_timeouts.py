"""One job timeout for the runner, the Celery limits a crawl message carries, and `manage.py crawl`."""

from __future__ import annotations

import pytest
from django.test import override_settings

import celeryconfig
from crawls.models import CrawlJob
from crawls.publish import crawl_signature
from crawls.timeouts import celery_time_limits, job_timeout
from registry.models import Scraper, ScraperVersion

pytestmark = pytest.mark.django_db

SPIDER = "runtime.spiders.link.LinkSpider"


def scraper_with(*timeouts: int | None, scraper_timeout: int | None = None) -> tuple[Scraper, list[ScraperVersion]]:
    scraper = Scraper.objects.create(
        name="slow", settings={"TRAWL_JOB_TIMEOUT": scraper_timeout} if scraper_timeout else {}
    )
    versions = [
        ScraperVersion.objects.create(
            scraper=scraper,
            version=f"1.{index}.0",
            spider=SPIDER,
            settings={"TRAWL_JOB_TIMEOUT": timeout} if timeout else {},
        )
        for index, timeout in enumerate(timeouts)
    ]
    return scraper, versions


@override_settings(TRAWL_JOB_TIMEOUT=600)
def test_the_version_that_ran_decides_then_its_scraper_then_the_project():
    scraper, (own, inherits) = scraper_with(3000, None, scraper_timeout=1200)
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper)

    assert job_timeout(job, own) == 3000
    assert job_timeout(job, inherits) == 1200
    other = Scraper.objects.create(name="plain")
    version = ScraperVersion.objects.create(scraper=other, version="1.0.0", spider=SPIDER)
    assert job_timeout(CrawlJob(url="http://a.test/", scraper=other), version) == 600


@override_settings(TRAWL_JOB_TIMEOUT=600)
def test_before_routing_the_limits_cover_the_slowest_active_version():
    scraper, (_fast, slow) = scraper_with(60, 5000)
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper)
    assert job_timeout(job) == 5000

    slow.deprecated_at = slow.created_at
    slow.save()
    assert job_timeout(job) == 600  # the project's default is the floor


@override_settings(TRAWL_JOB_TIMEOUT=600)
def test_a_crawl_message_carries_time_limits_above_its_own_timeout_not_the_global_one():
    """A version allowed 5000 s must not be killed by Celery limits computed from the project's 600 s."""
    scraper, _ = scraper_with(5000)
    job = CrawlJob.objects.create(url="http://shop.test/page", scraper=scraper, priority=100)

    message = crawl_signature(job=job)

    soft, hard = celery_time_limits(5000)
    assert 5000 < soft < hard
    assert message.options["soft_time_limit"] == soft
    assert message.options["time_limit"] == hard
    assert message.kwargs["url"] == "http://shop.test/page"  # what `celery inspect active` shows
    assert message.options["priority"] == 0  # priority 100 → the most urgent broker step


def test_default_celery_limits_follow_the_default_timeout_and_stay_under_the_visibility_timeout():
    soft, hard = celery_time_limits(600)
    assert (celeryconfig.task_soft_time_limit, celeryconfig.task_time_limit) == (soft, hard)
    assert celeryconfig.broker_transport_options["visibility_timeout"] > hard
