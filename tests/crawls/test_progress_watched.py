"""A running crawl records its live progress every second only while someone reads it (`manage.py crawl --wait`):
summing it was a good part of a crawl's own CPU, and a crawl process runs many crawls nobody watches. Its heartbeat
still writes the numbers to the job row, and a Redis outage still stops it within a second."""

from __future__ import annotations

import pytest

from crawls.live import cancel, progress
from crawls.live.progress import PROGRESS_SECONDS, progress_read
from crawls.models import CrawlJob
from crawls.services.ingestion import ItemIngest
from crawls.services.liveness import CrawlTick
from project.redis import get_redis

pytestmark = pytest.mark.django_db


@pytest.fixture
def tick(running_job):
    from scrapy import Spider

    from runtime.bridge.runner import CrawlSession
    from tests.crawler import trawl_crawler

    crawler = trawl_crawler(Spider)
    crawler._apply_settings()
    crawler.stats.set_value("response_received_count", 7)
    session = CrawlSession(crawler=crawler)
    session.reactor_held = True  # no reactor runs in this test: the stats are read here, not copied in its thread
    get_redis().delete(progress._key(running_job.pk), progress.watched_key(running_job.pk))
    yield CrawlTick(running_job, ingest=ItemIngest(running_job)), session
    get_redis().delete(progress._key(running_job.pk), progress.watched_key(running_job.pk))


def a_second_later(tick: CrawlTick) -> None:
    tick.last_progress -= PROGRESS_SECONDS
    cancel._watch.read_at = float("-inf")  # and the process's reading of its crawls' flags as old as its interval


def test_a_crawl_nobody_watches_records_no_progress_until_its_heartbeat(tick):
    tick, session = tick
    a_second_later(tick)
    assert tick(session) == ""
    assert progress_read(job_id=tick.job.pk) is None, "nobody watched: nothing recorded"

    tick.last_beat -= tick.heartbeat_every  # the heartbeat is due: the row gets the numbers all the same
    a_second_later(tick)
    get_redis().delete(progress.watched_key(tick.job.pk))  # the reading above marked it watched
    assert tick(session) == ""
    assert CrawlJob.objects.get(pk=tick.job.pk).stats["pages"] == 7
    assert not get_redis().exists(progress._key(tick.job.pk))


def test_once_read_a_crawls_progress_is_recorded_every_second(tick):
    tick, session = tick
    assert progress_read(job_id=tick.job.pk) is None  # the first reading: the row's numbers meanwhile
    a_second_later(tick)
    assert tick(session) == ""
    assert progress_read(job_id=tick.job.pk)["pages"] == 7

    session.crawler.stats.set_value("response_received_count", 9)
    a_second_later(tick)
    tick(session)
    assert progress_read(job_id=tick.job.pk)["pages"] == 9


def test_a_reader_is_counted_as_watching_for_three_of_its_intervals_and_at_least_the_default():
    progress_read(job_id="watched-default")
    progress_read(job_id="watched-slow", every=30)
    client = get_redis()
    try:
        assert 0 < client.ttl(progress.watched_key("watched-default")) <= progress.WATCHED_SECONDS
        assert progress.WATCHED_SECONDS < client.ttl(progress.watched_key("watched-slow")) <= 90
    finally:
        client.delete(progress.watched_key("watched-default"), progress.watched_key("watched-slow"))


def test_an_unwatched_crawl_still_stops_within_a_second_when_its_redis_stayed_away(tick):
    tick, session = tick
    session.crawler.stats.inc_value("trawl/infrastructure_errors")
    a_second_later(tick)
    assert tick(session) == "infrastructure"
