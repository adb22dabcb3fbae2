"""Faults with real processes: a crawl worker's pool process SIGKILLed mid-crawl, once or on every attempt.

The workers and beat these tests start run the reaper every second and call a heartbeat stale after 3 s (production:
every 15 s, 30 s). Nothing here waits for the broker's visibility timeout.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from crawls.models import CrawlJob
from items.models import Item
from tests.callbacks.harness import Beat, exclusive
from tests.e2e.faults_stack import REAPER_ENV, Cluster, reaper_every, slow_site, submit, wait_job
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["slow_site"]  # a fixture


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
