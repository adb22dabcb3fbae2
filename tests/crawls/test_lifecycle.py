"""The life-cycle module: jobs created many at a time (checked, one INSERT, published after the commit through the
real broker), a broker that is away losing no job, the one requeue, and a dispatch pass past an invalid source."""

from __future__ import annotations

import math
from contextlib import contextmanager
from datetime import timedelta

import pytest
from celery import current_app
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from kombu import Connection

from crawls.models import CrawlJob, JobStatus
from crawls.services import reaper
from crawls.services.lifecycle import CREATE_BATCH_SIZE, AttemptCause, job_attempt_over, job_claim, jobs_create_many
from crawls.services.validation import JobSpecsInvalid
from ops.queues import queue_depths
from project.redis import get_redis, redis_key
from registry.models import Scraper
from sources.models import Source
from sources.services.dispatch import DISPATCH_LEASE, sources_dispatch_due

pytestmark = pytest.mark.django_db
CRAWLS = "crawls"


@pytest.fixture
def crawl_queue(redis_server):
    """The broker's crawl queue, emptied before and after (a test's messages must not reach another's workers), with
    no worker consuming it meanwhile: a crawl worker an earlier test file of this process started (the session's
    `crawl_worker`) would take a message before it is counted."""
    paused = current_app.control.cancel_consumer(CRAWLS, reply=True, timeout=2)
    try:
        with current_app.connection_for_write() as conn:
            conn.default_channel.queue_purge(CRAWLS)
            yield lambda: queue_depths()["queues"][CRAWLS]["total"]
            conn.default_channel.queue_purge(CRAWLS)
    finally:
        for reply in paused:
            current_app.control.add_consumer(CRAWLS, destination=list(reply), reply=True, timeout=2)


@pytest.fixture
def broker_away(monkeypatch):
    """The broker does not answer: Celery's producer talks to a port nothing listens on."""

    @contextmanager
    def producer_on_a_dead_port(producer=None):
        with Connection("redis://127.0.0.1:1/0", connect_timeout=1) as dead:
            yield current_app.amqp.Producer(dead)

    monkeypatch.setattr(current_app, "producer_or_acquire", producer_on_a_dead_port)


def specs(n: int, **fields) -> list[dict]:
    return [{"url": f"http://shop.test/p/{index}", **fields} for index in range(n)]


def test_many_jobs_are_checked_created_in_one_insert_and_published_once_committed(builtins, requester, crawl_queue):
    with TestCase.captureOnCommitCallbacks(execute=False) as callbacks:
        with CaptureQueriesContext(connection) as queries:
            jobs = jobs_create_many(specs=specs(80, priority=70), requester=requester)
        assert crawl_queue() == 0, "nothing reaches the broker before the transaction commits"
    inserts = [query for query in queries.captured_queries if query["sql"].startswith("INSERT")]

    for callback in callbacks:
        callback()

    # One INSERT, in as many statements as the database's limit on parameters asks for (SQLite: ~38 rows each).
    rows_per_insert = min(CREATE_BATCH_SIZE, connection.ops.bulk_batch_size(CrawlJob._meta.concrete_fields, jobs))
    assert len(jobs) == 80 and len(inserts) == math.ceil(80 / rows_per_insert)
    assert CrawlJob.objects.filter(status=JobStatus.QUEUED, priority=70, requester=requester).count() == 80
    assert crawl_queue() == 80


def test_one_bad_spec_creates_nothing_and_names_each_one(builtins, crawl_queue):
    bad = [*specs(3), {"url": "ftp://shop.test/"}, {"url": "http://shop.test/x", "scraper": "nope"}]

    with pytest.raises(JobSpecsInvalid) as error:
        jobs_create_many(specs=bad)

    assert {index: exc.field for index, exc in error.value.errors.items()} == {3: "url", 4: "scraper"}
    assert not CrawlJob.objects.exists()


def test_a_broker_away_loses_no_job_the_reaper_publishes_it(builtins, crawl_queue, broker_away, settings, monkeypatch):
    with TestCase.captureOnCommitCallbacks(execute=True):
        jobs = jobs_create_many(specs=specs(5))  # the publish fails after the commit: it must not raise

    assert crawl_queue() == 0
    assert CrawlJob.objects.filter(status=JobStatus.QUEUED).count() == 5
    monkeypatch.undo()  # the broker is back
    for job in jobs:
        get_redis().delete(redis_key("reaper", "republished", job.pk))
    later = timezone.now() + timedelta(seconds=settings.TRAWL_REAPER_QUEUED_SECONDS + 1)

    assert reaper.jobs_reap(now=later)["republished"] == 5
    assert crawl_queue() == 5


@pytest.mark.parametrize("cause", [AttemptCause.WORKER_LOST, AttemptCause.INFRASTRUCTURE])
def test_a_requeue_is_a_new_attempt_published_and_only_once(builtins, crawl_queue, cause):
    with TestCase.captureOnCommitCallbacks(execute=True):
        (job,) = jobs_create_many(specs=specs(1))
    running = job_claim(job_id=job.pk, attempt=1, worker="w/1")

    requeued = job_attempt_over(job=running, cause=cause, reason="test")

    assert (requeued.status, requeued.attempt, requeued.worker, requeued.heartbeat_at) == ("queued", 2, "", None)
    assert requeued.max_attempts == (3 if cause == AttemptCause.WORKER_LOST else 4)
    assert crawl_queue() == 2  # the first attempt's message and the requeued one's
    assert job_attempt_over(job=running, cause=cause, reason="again") is None
    assert job_claim(job_id=job.pk, attempt=1, worker="w/2") is None, "the old attempt's message cannot claim it"


def test_a_requeue_with_the_broker_away_stays_queued_for_the_reaper(builtins, crawl_queue, broker_away):
    with TestCase.captureOnCommitCallbacks(execute=True):
        (job,) = jobs_create_many(specs=specs(1))
    running = job_claim(job_id=job.pk, attempt=1, worker="w/1")

    requeued = job_attempt_over(job=running, cause=AttemptCause.WORKER_LOST, reason="worker lost")

    assert (requeued.status, requeued.attempt) == ("queued", 2)


def test_a_dispatch_pass_books_an_invalid_source_without_a_job_and_dispatches_the_others(builtins, crawl_queue):
    get_redis().delete(redis_key("lease", DISPATCH_LEASE))
    link = Scraper.objects.get(name="link")
    now = timezone.now()
    for n in range(3):
        Source.objects.create(url=f"http://shop.test/list-{n}.html", scraper=link, next_sync_at=now)
    broken = Source.objects.create(url="http://shop.test/broken.html", scraper=link, next_sync_at=now)
    Source.objects.filter(pk=broken.pk).update(url="ftp://shop.test/broken.html")  # past the model's checks

    with TestCase.captureOnCommitCallbacks(execute=True):
        published = sources_dispatch_due(now=now)

    broken.refresh_from_db()
    assert published == 3 and not broken.jobs.exists()
    assert broken.next_sync_at > now and broken.schedule_note.startswith("not dispatched")
    assert crawl_queue() == 3
