"""What the fault tests start (tests/e2e/test_faults_*.py, and tests that reuse it): workers and beat whose reaper runs
every second and calls a heartbeat stale after 3 s (production: every 15 s, 30 s), the test site slowed down, a
private Redis stopped and started at will, and a worker on it.
"""

from __future__ import annotations

import socket
import time

import pytest

from crawls.models import CrawlJob
from project.redis.server import redis_start_if_absent
from tests.callbacks.harness import FAST_ENV, Beat
from tests.workers import Worker

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


def submit(api, **body) -> str:
    response = api.post("/api/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def wait_job(job_id, predicate, *, timeout: float, cluster, why: str) -> CrawlJob:
    """The job once `predicate(job)` holds; `cluster` is anything with `logs()` (this module's or frontier_stack's)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = CrawlJob.objects.get(pk=job_id)
        if predicate(job):
            return job
        time.sleep(0.1)
    raise AssertionError(f"{why}: job still {job.status} attempt {job.attempt} after {timeout}s\n{cluster.logs()}")


def wait_batch(batch_id, predicate, *, cluster, timeout: float, why: str = "condition") -> list[CrawlJob]:
    """The batch's jobs once `predicate(jobs)` holds; `cluster` is anything with `logs()`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = list(CrawlJob.objects.filter(batch_id=batch_id))
        if predicate(jobs):
            return jobs
        time.sleep(0.2)
    states = [(job.status, job.attempt) for job in CrawlJob.objects.filter(batch_id=batch_id)]
    raise AssertionError(f"batch jobs never {why}: {states}\n{cluster.logs()}")


@pytest.fixture
def slow_site(site):
    delay, site.slow_delay = site.slow_delay, 0.5
    yield site
    site.slow_delay = delay


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


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


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
