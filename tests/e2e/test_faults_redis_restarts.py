"""Faults with real processes: Redis going away, /healthz while it is, and Redis stopped mid-batch and restarted
empty (with the tests' fast reaper, and with production's periods)."""

from __future__ import annotations

import time

import pytest

from crawls.models import CrawlJob
from tests.callbacks.harness import Beat, Receiver
from tests.e2e.faults_stack import (
    REAPER_ENV,
    Cluster,
    PrivateWorker,
    private_redis,
    reaper_every,
    slow_site,
    wait_batch,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["private_redis", "slow_site"]  # fixtures


def test_healthz_says_redis_is_down_while_it_is_and_recovers_on_its_own(client, private_redis, settings):
    from project.redis import get_redis

    settings.REDIS_URL = private_redis.url
    get_redis.cache_clear()
    try:
        assert client.get("/healthz").json()["redis"] == "ok"
        private_redis.stop()
        down = client.get("/healthz")
        private_redis.start()
        deadline = time.monotonic() + 20
        while client.get("/healthz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        back = client.get("/healthz")
    finally:
        get_redis.cache_clear()

    assert down.status_code == 503
    assert (down.json()["status"], down.json()["database"]) == ("degraded", "ok")
    assert down.json()["redis"] == "down"
    assert back.status_code == 200 and back.json()["redis"] == "ok"


def test_redis_restarted_empty_mid_batch_every_job_still_ends_and_the_batch_completes(
    builtins, requester, slow_site, private_redis, tmp_path, monkeypatch
):
    """Redis dies with the batch's chord, queued messages and unacked crawls in it, and comes back empty. The
    workers and beat reconnect by themselves; the reaper republishes queued jobs and requeues running ones whose
    heartbeat stopped; the batch sweeper finalizes the batch from the database."""
    from crawls.services import batches
    from project.celery import app

    # The batch backstop far away, as in production: the reaper is the one to requeue crawls the outage broke.
    env = {**REAPER_ENV, "REDIS_URL": private_redis.url, "TRAWL_BATCH_JOB_LOST_SECONDS": "120"}
    reaper_every(1)
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(name="sweep-batches").update(interval=every_second)

    def publish_to_private_redis(work, **options):
        with app.connection_for_write(private_redis.url) as connection:
            return work.apply_async(connection=connection, **options)

    monkeypatch.setattr("project.messaging.messages.send", publish_to_private_redis)
    ops = PrivateWorker(queues="control,callbacks", concurrency=1, broker_url=private_redis.url, log_dir=tmp_path)
    crawlers = PrivateWorker(queues="crawls", concurrency=2, broker_url=private_redis.url, log_dir=tmp_path)
    beat = Beat(log_dir=tmp_path, env=env)
    cluster = Cluster(ops, [crawlers], beat)
    try:
        ops.start(), crawlers.start(), beat.start()
        specs = [{"url": f"{slow_site.url}/slow/{90_000 + 100 * n}", "options": {"maxdepth": 6}} for n in range(6)]
        batch = batches.batch_create(requester=requester, jobs=specs)
        wait_batch(batch.pk, lambda jobs: any(j.status == "running" for j in jobs), cluster=cluster, timeout=60)
        private_redis.stop()
        time.sleep(5)
        private_redis.start()
        jobs = wait_batch(
            batch.pk, lambda jobs: all(j.status in FINAL for j in jobs), cluster=cluster, timeout=150, why="final"
        )
        batch.refresh_from_db()
        deadline = time.monotonic() + 30
        while batch.finished_at is None and time.monotonic() < deadline:
            time.sleep(0.5)
            batch.refresh_from_db()
    finally:
        beat.stop()
        crawlers.stop()
        ops.stop()

    assert batch.finished_at is not None and batch.status == "completed", cluster.logs()
    assert sum(batch.totals.values()) == 6
    assert all(job.status in FINAL for job in jobs)
    # Nothing was lost for good: the crawls that ran through the outage finished, the lost messages were republished.
    assert batch.totals["succeeded"] == 6, (batch.totals, [(job.status, job.error_message) for job in jobs])
    assert all(job.attempt <= 2 for job in jobs), ([(str(job.pk), job.attempt) for job in jobs], cluster.logs())


FINAL = ("succeeded", "failed", "cancelled", "dead")


def test_redis_restarted_empty_with_production_timings_blames_no_site_and_completes_the_batch_once(
    builtins, requester, slow_site, private_redis, tmp_path, monkeypatch
):
    """Ten jobs against a healthy site; Redis is killed mid-batch and comes back empty. With the production reaper
    and sweeper periods (no 5 s shortcuts): the running crawls wait the outage out, the queued jobs whose messages
    died are republished as soon as the reaper sees the new Redis, every job succeeds, no source is blamed, and
    exactly one `batch.completed` arrives within 180 s of Redis returning."""
    from django_celery_beat.models import PeriodicTask

    from crawls.services import batches
    from project.celery import app

    env = {"REDIS_URL": private_redis.url}
    reaper_every(15)  # production's TRAWL_REAPER_INTERVAL_SECONDS
    PeriodicTask.objects.filter(name="sweep-deliveries").update(enabled=True)

    def publish_to_private_redis(work, **options):
        with app.connection_for_write(private_redis.url) as connection:
            return work.apply_async(connection=connection, **options)

    monkeypatch.setattr("project.messaging.messages.send", publish_to_private_redis)
    # Production thresholds: queued grace 900 s, stale after 3 heartbeats + 15 s, batch backstop 900 s.
    worker_env = {**env, "TRAWL_WEBHOOK_BACKOFF_SECONDS": "1", "TRAWL_WEBHOOK_BACKOFF_MAX_SECONDS": "5"}
    ops = PrivateWorker(queues="control,callbacks", concurrency=1, broker_url=private_redis.url, log_dir=tmp_path)
    crawlers = PrivateWorker(queues="crawls", concurrency=2, broker_url=private_redis.url, log_dir=tmp_path)
    ops.extra_env = crawlers.extra_env = worker_env
    beat = Beat(log_dir=tmp_path, env=env)
    cluster = Cluster(ops, [crawlers], beat)
    with Receiver() as receiver:
        try:
            ops.start(), crawlers.start(), beat.start()
            specs = [
                {"url": f"{slow_site.url}/slow/{190_000 + 100 * n}", "options": {"maxdepth": 5}} for n in range(10)
            ]
            batch = batches.batch_create(requester=requester, jobs=specs, callback_url=receiver.url)
            wait_batch(
                batch.pk, lambda jobs: sum(j.status == "running" for j in jobs) >= 2, cluster=cluster, timeout=60
            )
            private_redis.stop()
            time.sleep(5)
            private_redis.start()
            back_at = time.monotonic()
            receiver.wait_for(lambda r: r.events("batch.completed"), timeout=180, why="batch.completed")
            completed_after = time.monotonic() - back_at
            time.sleep(5)  # a duplicate would come now
        finally:
            beat.stop()
            crawlers.stop()
            ops.stop()
        completed = receiver.events("batch.completed")

    jobs = list(CrawlJob.objects.filter(batch_id=batch.pk))
    outcomes = [(job.status, job.error_class, job.error_message[:80]) for job in jobs]
    assert [job.status for job in jobs] == ["succeeded"] * 10, (outcomes, cluster.logs())
    assert len(completed) == 1 and completed_after < 180
    assert completed[0].json["data"]["totals"]["succeeded"] == 10
    # The outage cost no attempt: a crawl whose frontier Redis lost is requeued as a new attempt that does not count
    # against max_attempts (3 by default), so every job still has its full budget left.
    assert all(job.max_attempts - job.attempt == 2 for job in jobs), [(j.attempt, j.max_attempts) for j in jobs]
