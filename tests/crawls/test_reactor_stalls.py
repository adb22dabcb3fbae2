"""What handing a crawl back means for its job when its process's reactor stalls (crawls/worker/stalls.py): its
in-flight requests back in its frontier, the stall counted in its stats, a new attempt (spent by the crawl on the
reactor's stack, not by a bystander) or, after the last, the end `failed` / `reactor_stalled` with the stack."""

from __future__ import annotations

import pytest

from crawls.models import CrawlJob, JobStatus
from crawls.services.shards import Shard
from crawls.worker.stalls import crawl_hand_back
from runtime.bridge.watchdog import Stall

pytestmark = pytest.mark.django_db

STACK = '  File "/srv/spiders/shop.py", line 12, in parse\n    values = slow(response)\n'
STALL = Stall(silent_for=31.0, stack=STACK, suspects=frozenset({"the-crawl"}))


@pytest.fixture
def crawl(running_job, settings):
    """A running job (attempt 1 of 3) whose shard holds one request in flight and one queued."""
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 30  # the request stays this shard's until handed back
    job = running_job
    shard = Shard(job)
    shard.frontier.open(create=True)
    shard.frontier.renew()  # the shard's lease, as its crawl keeps it
    shard.frontier.push(b"request-1")
    shard.frontier.push(b"request-2")
    assert len(shard.frontier.pop(1)) == 1 and shard.frontier.pending() == 1
    shard.total({"pages": 4})
    yield job, shard
    shard.frontier.delete()


def test_the_crawl_that_held_the_reactor_is_requeued_from_its_frontier_spending_an_attempt(crawl):
    job, shard = crawl

    crawl_hand_back(STALL, True, job=job, shard=shard)

    job.refresh_from_db()
    assert (job.status, job.attempt, job.max_attempts) == (JobStatus.QUEUED, 2, 3)
    assert shard.frontier.pending() == 2  # the request in flight is queued again for the next attempt
    assert job.stats["reactor_stalls"] == 1 and job.stats["pages"] == 4


def test_a_bystander_of_another_crawls_stall_spends_no_attempt(crawl):
    job, shard = crawl

    crawl_hand_back(STALL, False, job=job, shard=shard)

    job.refresh_from_db()
    assert (job.status, job.attempt, job.max_attempts) == (JobStatus.QUEUED, 2, 4)
    assert job.stats["process_recycled"] == 1 and "reactor_stalls" not in job.stats


def test_on_its_last_attempt_the_crawl_that_held_the_reactor_ends_failed_with_the_reactors_stack(crawl):
    job, shard = crawl
    CrawlJob.objects.filter(pk=job.pk).update(attempt=3)
    job.refresh_from_db()

    crawl_hand_back(STALL, True, job=job, shard=shard)

    job.refresh_from_db()
    assert (job.status, job.error_class, job.attempt) == (JobStatus.FAILED, "reactor_stalled", 3)
    assert "TRAWL_REACTOR_STALL_SECONDS" in job.error_message and "in parse" in job.error_message


def test_a_bystander_keeps_what_its_attempt_did_though_its_reactor_never_copied_its_stats(crawl):
    """A crawl done with its pages when another crawl wedged the shared reactor: its numbers, read straight from its
    crawler, go into the job's, so its next attempt (with nothing left to fetch) does not look like a spider that made
    no requests."""
    from scrapy import Spider

    from crawls.services.ingestion import ItemIngest
    from crawls.services.liveness import CrawlTick
    from runtime.bridge.runner import CrawlSession
    from tests.crawler import trawl_crawler

    job, shard = crawl
    crawler = trawl_crawler(Spider)
    crawler._apply_settings()
    crawler.stats.set_value("downloader/request_count", 3)
    crawler.stats.set_value("response_received_count", 3)
    tick = CrawlTick(job, ingest=ItemIngest(job, shard=shard), shard=shard)
    tick.session = CrawlSession(crawler=crawler)

    crawl_hand_back(STALL, False, job=job, shard=shard, tick=tick)

    job.refresh_from_db()
    assert job.stats["requests"] == 3 and job.stats["process_recycled"] == 1, job.stats
