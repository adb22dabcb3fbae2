"""Faults with real processes: a crawl worker's pool process SIGKILLed mid-crawl (once, or on every attempt), Redis
stopped mid-batch and restarted empty, a webhook receiver down for a while.

The workers and beat these tests start run the reaper every second and call a heartbeat stale after 3 s (production:
every 15 s, 30 s). Nothing here waits for the broker's visibility timeout.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from crawls.models import CrawlJob
from items.models import Item
from project.redis_server import redis_start_if_absent
from tests.callbacks.harness import FAST_ENV, Beat, Receiver, exclusive, running_alone
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REAPER_ENV = {**FAST_ENV, "TRAWL_REAPER_STALE_SECONDS": "3", "TRAWL_REAPER_QUEUED_SECONDS": "5"}


class Cluster:
    def __init__(self, ops: Worker, crawlers: list[Worker], beat: Beat) -> None:
        self.ops, self.crawlers, self.beat = ops, crawlers, beat

    def logs(self) -> str:
        parts = [f"--- ops ---\n{self.ops.log_tail()}", f"--- beat ---\n{self.beat.log_tail()}"]
        parts += [f"--- crawler {n} ---\n{worker.log_tail()}" for n, worker in enumerate(self.crawlers)]
        return "\n".join(parts)


def reaper_every(seconds: int) -> None:
    """Beat's periodic tasks (a transactional test flushed them) with the reaper every `seconds`, nothing else due."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from project.periodic import periodic_tasks_ensure

    periodic_tasks_ensure()
    interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(name="reap-dead-jobs").update(interval=interval)
    PeriodicTask.objects.exclude(name__in=["reap-dead-jobs", "sweep-batches"]).update(enabled=False)


@pytest.fixture
def cluster(django_db_setup, django_db_blocker, redis_server, tmp_path):
    reaper_every(1)
    ops = Worker(queues="control,callbacks", concurrency=1, env=REAPER_ENV, log_dir=tmp_path)
    crawlers = [Worker(queues="crawls", concurrency=1, env=REAPER_ENV, log_dir=tmp_path) for _ in range(2)]
    beat = Beat(log_dir=tmp_path, env=REAPER_ENV)
    try:
        for worker in (ops, *crawlers):
            worker.start()
        with exclusive(ops, *crawlers):
            beat.start()
            yield Cluster(ops, crawlers, beat)
    finally:
        beat.stop()
        for worker in (*crawlers, ops):
            worker.stop()


@pytest.fixture
def slow_site(site):
    delay, site.slow_delay = site.slow_delay, 0.5
    yield site
    site.slow_delay = delay


def submit(api, **body) -> str:
    response = api.post("/api/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def wait_job(job_id, predicate, *, timeout: float, cluster: Cluster, why: str) -> CrawlJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = CrawlJob.objects.get(pk=job_id)
        if predicate(job):
            return job
        time.sleep(0.1)
    raise AssertionError(f"{why}: job still {job.status} attempt {job.attempt} after {timeout}s\n{cluster.logs()}")


def kill_pool_process(job: CrawlJob) -> int:
    """SIGKILL the pool process running the job (its pid ends the job's `worker`): no ack, no outcome, no goodbye."""
    pid = int(job.worker.rsplit("/", 1)[-1])
    os.kill(pid, signal.SIGKILL)
    return pid


def test_a_crawl_whose_worker_process_is_killed_finishes_as_attempt_2_without_duplicate_items(
    api, builtins, slow_site, cluster
):
    start, depth = 70_000, 8
    job_id = submit(api, url=f"{slow_site.url}/slow/{start}", options={"maxdepth": depth})
    running = wait_job(
        job_id,
        lambda j: j.status == "running" and (j.stats or {}).get("items", 0) >= 2,
        timeout=60,
        cluster=cluster,
        why="first attempt never got going",
    )
    killed_at = time.monotonic()
    kill_pool_process(running)

    job = wait_job(
        job_id, lambda j: j.status in ("succeeded", "failed", "dead"), timeout=60, cluster=cluster, why="no outcome"
    )

    assert (job.status, job.attempt) == ("succeeded", 2), job.error_message
    assert job.worker != running.worker
    # Minutes at most: the broker's visibility timeout (an hour) played no part.
    assert time.monotonic() - killed_at < 45
    pages = [f"{slow_site.url}/slow/{start + n}" for n in range(depth + 1)]
    urls = list(Item.objects.filter(url__in=pages).values_list("url", flat=True))
    assert sorted(urls) == sorted(pages)  # every page once: the first attempt's items were upserted, not duplicated
    assert job.stats["items"] == depth + 1


def test_a_crawl_killed_on_every_attempt_ends_dead_worker_lost(api, builtins, slow_site, cluster):
    job_id = submit(api, url=f"{slow_site.url}/slow/80000", options={"maxdepth": 20})
    killed = []
    for attempt in (1, 2, 3):
        job = wait_job(
            job_id,
            lambda j, attempt=attempt: j.status == "running" and j.attempt == attempt,
            timeout=60,
            cluster=cluster,
            why=f"attempt {attempt} never ran",
        )
        time.sleep(1.0)
        killed.append(kill_pool_process(job))

    job = wait_job(job_id, lambda j: j.status == "dead", timeout=30, cluster=cluster, why="never ended dead")

    assert (job.status, job.error_class, job.attempt) == ("dead", "worker_lost", 3)
    assert job.finished_at is not None
    assert len(set(killed)) == 3


# --- Redis going away ----------------------------------------------------------------------------------------


class PrivateRedis:
    """A redis-server of our own on a free port (no persistence, like a crashed cache): stopped and started at will."""

    def __init__(self, log_dir) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = str(log_dir / f"redis-{self.port}.log")
        self.process = None

    def start(self) -> PrivateRedis:
        self.process = redis_start_if_absent(self.url, log_path=self.log)
        assert self.process is not None, f"something already answers on port {self.port}"
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None


class PrivateWorker(Worker):
    """A worker on another broker (a private Redis)."""

    def __init__(self, *, broker_url: str, **kwargs) -> None:
        super().__init__(env={**REAPER_ENV, "REDIS_URL": broker_url, "TRAWL_BATCH_JOB_LOST_SECONDS": "120"}, **kwargs)

    def _wait_ready(self, timeout: float) -> None:
        # Our control client talks to the session's broker, so read the worker's own "ready." line instead.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}:\n{self.log_tail()}")
            if " ready." in self.log_tail(200):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"worker not ready within {timeout}s:\n{self.log_tail()}")


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


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
    assert down.json()["redis"].startswith("down:")
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

    monkeypatch.setattr("project.messages.send", publish_to_private_redis)
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
    assert all(job.attempt <= 2 for job in jobs)


FINAL = ("succeeded", "failed", "cancelled", "dead")


def wait_batch(batch_id, predicate, *, cluster: Cluster, timeout: float, why: str = "condition") -> list[CrawlJob]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = list(CrawlJob.objects.filter(batch_id=batch_id))
        if predicate(jobs):
            return jobs
        time.sleep(0.2)
    states = [(job.status, job.attempt) for job in CrawlJob.objects.filter(batch_id=batch_id)]
    raise AssertionError(f"batch jobs never {why}: {states}\n{cluster.logs()}")


# --- a webhook receiver going away ---------------------------------------------------------------------------


@pytest.fixture
def callbacks_worker(django_db_setup, django_db_blocker, redis_server, tmp_path):
    worker = Worker(queues="callbacks", concurrency=1, env=FAST_ENV, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def receiver_on(port: int) -> Receiver:
    """A Receiver on a given port (the one the delivery has been failing to reach)."""
    receiver = Receiver()
    handler = receiver.server.RequestHandlerClass
    receiver.server.server_close()
    receiver.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    receiver.server.daemon_threads = True
    receiver.thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    return receiver


def test_a_webhook_receiver_down_for_a_while_gets_the_event_later_exactly_once(requester, callbacks_worker, settings):
    from callbacks.models import Delivery
    from callbacks.services import event_emit

    settings.TRAWL_WEBHOOK_MAX_ATTEMPTS = 8
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    delivery = event_emit(
        event="job.failed",
        dedupe_key="job:receiver-down",
        target_url=f"http://127.0.0.1:{port}/hook",
        data={"id": "x"},
        requester_id=requester.pk,
    )
    deadline = time.monotonic() + 30
    while Delivery.objects.get(pk=delivery.pk).attempts < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    refused = Delivery.objects.get(pk=delivery.pk)
    assert refused.attempts >= 3 and refused.status not in ("delivered", "dead"), callbacks_worker.log_tail()

    with receiver_on(port) as receiver:
        receiver.wait_for(lambda r: r.events("job.failed"), timeout=30, why="the late delivery")
        time.sleep(3)  # any duplicate would arrive now
        received = receiver.events()
    delivery.refresh_from_db()

    assert delivery.status == "delivered" and delivery.attempts > refused.attempts
    assert len(received) == 1
    assert received[0].headers["X-Trawl-Delivery"] == str(delivery.pk)
    log = list(delivery.attempt_log.order_by("number").values_list("ok", flat=True))
    assert log[-1] is True and not any(log[:-1])


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

    monkeypatch.setattr("project.messages.send", publish_to_private_redis)
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
