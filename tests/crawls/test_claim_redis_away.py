"""A crawl message's claim while Trawl's Redis is away, against a Redis server of the test's own that it stops and
starts: the claim waits for Redis and the job runs as the same attempt once it answers. Claimed at once, the crawl's
first Redis call failed and the job was requeued, an attempt spent; the next claim in line picked that job again and
spent another (a Redis restarted mid-batch left a job at attempt 3)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from crawls.models import CrawlJob
from registry.models import Scraper, ScraperVersion
from tests.e2e.faults_stack import private_redis

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["private_redis"]  # fixture


@pytest.fixture
def on_private_redis(private_redis, settings):
    from project.redis import get_redis

    settings.REDIS_URL = private_redis.url
    get_redis.cache_clear()
    yield private_redis
    get_redis.cache_clear()


def unroutable_job() -> CrawlJob:
    """A job that ends `failed` (routing) right after its claim, with no crawl to run in the test's process."""
    scraper = Scraper.objects.create(name="no_route")
    ScraperVersion.objects.create(scraper=scraper, version="1.0.0", spider="runtime.spiders.link.LinkSpider")
    return CrawlJob.objects.create(url="http://shop.test/", scraper=scraper)


def test_a_claim_waits_for_redis_and_the_job_keeps_its_attempt(on_private_redis):
    from crawls.services.execution import job_execute

    job = unroutable_job()
    on_private_redis.stop()
    results: list = []

    def claim_one() -> None:
        try:
            results.append(job_execute(job_id=str(job.pk), attempt=1, worker="t"))
        except BaseException as exc:  # reported by the test, not lost with the thread
            results.append(exc)
        finally:
            connection.close()  # the thread's own: the test database is dropped after the test

    claim = threading.Thread(target=claim_one, daemon=True)
    claim.start()
    try:
        time.sleep(2)  # without the wait, a claim, its failed start and the requeue take well under a second
        job.refresh_from_db()
        assert (job.status, job.attempt, claim.is_alive()) == ("queued", 1, True)
    finally:
        try:
            on_private_redis.start()
        finally:
            claim.join(60)

    assert not claim.is_alive() and len(results) == 1 and isinstance(results[0], dict), results
    job.refresh_from_db()
    assert (job.status, job.error_class, job.attempt) == ("failed", "routing", 1)
    assert results[0]["status"] == "failed"


def test_redis_gone_while_a_claim_waited_for_its_turn_the_claim_waits_again(on_private_redis, monkeypatch):
    """Redis answered before the turn and died while the claim waited in line (the CI case: a host's claims queued
    behind each other as Redis stopped): checked again in the turn, the claim waits Redis out and claims then."""
    from crawls.services import jobs
    from crawls.services.execution import job_execute

    job = unroutable_job()
    back = threading.Timer(2, on_private_redis.start)

    @contextmanager
    def turn_while_redis_dies() -> Iterator[None]:
        on_private_redis.stop()
        back.start()
        yield

    monkeypatch.setattr(jobs, "claim_turn", turn_while_redis_dies)
    try:
        result = job_execute(job_id=str(job.pk), attempt=1, worker="t")
    finally:
        back.join(30)

    job.refresh_from_db()
    assert (job.status, job.error_class, job.attempt) == ("failed", "routing", 1), job.error_message
    assert result["status"] == "failed"


def test_past_its_patience_a_claim_leaves_the_job_queued_for_the_reaper(on_private_redis, settings):
    from crawls.services.execution import job_execute

    settings.TRAWL_INFRA_PATIENCE_SECONDS = 1  # the claim waits min(this, a third of the soft limit's margin)
    job = unroutable_job()
    on_private_redis.stop()

    result = job_execute(job_id=str(job.pk), attempt=1, worker="t")

    job.refresh_from_db()
    assert (result["claimed"], result["status"]) == (False, "queued")
    assert (job.status, job.attempt, job.worker) == ("queued", 1, "")
