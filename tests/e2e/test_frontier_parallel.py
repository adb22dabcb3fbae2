"""Parallel crawls with real worker processes and a local site that logs every request it serves: `parallelism: 2`
over two worker processes fetches every page once, stores every item once, both shards worked; cancelling a parallel
crawl stops every shard; `parallelism: 4` on two processes completes; Redis emptied under two shards starts the job
again on a fresh frontier."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.conf import settings

from crawls.models import JobLog
from items.models import Item
from tests.e2e.frontier_stack import cluster, crawl, fast_throttle, tree_site, wait_job, wait_pages

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["cluster", "fast_throttle", "tree_site"]  # fixtures


# Pages of 1 s: the crawl outlasts the second shard's delivery, claim and start on a loaded machine (the first shard,
# finding the frontier done before the second joined, would end the job with every page its own).
@pytest.mark.parametrize("tree_site", [(63, 1.0)], indirect=True)
def test_parallelism_2_over_two_processes_fetches_every_page_once(api, builtins, fast_throttle, tree_site, cluster):
    job_id = crawl(api, tree_site, parallelism=2)

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=90, cluster=cluster, why="no end")

    assert job.status == "succeeded", job.error_message
    hits = tree_site.page_hits()
    assert hits == Counter(tree_site.all_paths())  # every page exactly once
    items = Item.objects.filter(url__startswith=f"{tree_site.url}/p/")
    assert items.count() == tree_site.pages
    assert job.stats["items"] == tree_site.pages and job.stats["pages"] == tree_site.pages
    # Both shards worked: each has pages of its own.
    assert sorted(job.stats["pages_by_shard"]) == ["1:0", "1:1"]
    assert all(pages > 0 for pages in job.stats["pages_by_shard"].values()), job.stats["pages_by_shard"]
    detail = api.get(f"/api/jobs/{job_id}/").json()
    assert (detail["parallelism"], detail["attempt"]) == (2, 1)
    # Each shard logs into its own part of the job's log; the log API merges them by time. Both shards' logs are
    # whole as soon as the job has ended: the shard that left first flushed its log before the other ended the job.
    log = api.get(f"/api/jobs/{job_id}/log/").content.decode()
    assert log.count(" Spider opened") == 2 and log.count(" Spider closed (finished)") == 2, log[-3000:]
    assert "the job ends with its last shard" in log
    deadline = time.monotonic() + 30
    while set(JobLog.objects.filter(job_id=job_id).values_list("shard", flat=True)) != {0, 1}:
        assert time.monotonic() < deadline, "both shards' logs not stored within 30 s of the job's end"
        time.sleep(0.2)
    assert api.get(f"/api/jobs/{job_id}/log/").content.decode().count(" Spider closed (finished)") == 2


@pytest.mark.parametrize("tree_site", [(100_000, 0.25)], indirect=True)
def test_cancelling_a_parallel_crawl_stops_every_shard(api, builtins, fast_throttle, tree_site, cluster):
    job_id = crawl(api, tree_site, parallelism=2)
    wait_job(
        job_id,
        lambda j: len((j.stats or {}).get("pages_by_shard") or {}) == 2,
        timeout=60,
        cluster=cluster,
        why="both shards never reported progress",
    )

    assert api.post(f"/api/jobs/{job_id}/cancel/").status_code == 202
    job = wait_job(job_id, lambda j: j.status == "cancelled", timeout=30, cluster=cluster, why="cancel ignored")

    # Every shard stopped: after a moment for requests already sent, the site hears nothing more.
    time.sleep(3)
    served = sum(tree_site.page_hits().values())
    time.sleep(3)
    assert sum(tree_site.page_hits().values()) == served, f"a shard still crawls\n{cluster.logs()}"
    assert job.error_class == "cancelled"
    # Each shard's task returned, a moment after the job's status (both may have run in one worker's crawl host).
    deadline = time.monotonic() + 30
    while shard_tasks_returned(cluster) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert shard_tasks_returned(cluster) >= 2, cluster.logs()


def shard_tasks_returned(cluster) -> int:
    return sum(worker.log_tail(400).count(" succeeded in ") for worker in cluster.crawlers)


def test_parallelism_4_on_two_processes_completes(api, builtins, fast_throttle, tree_site, cluster):
    job_id = crawl(api, tree_site, parallelism=4)

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=120, cluster=cluster, why="no end")

    assert job.status == "succeeded", job.error_message
    assert tree_site.page_hits() == Counter(tree_site.all_paths())
    assert Item.objects.filter(url__startswith=f"{tree_site.url}/p/").count() == tree_site.pages


@pytest.mark.parametrize("tree_site", [(800, 0.01)], indirect=True)
def test_a_parallel_crawl_whose_frontier_redis_lost_starts_again_and_fetches_every_page(
    api, builtins, tree_site, cluster
):
    """Redis emptied (FLUSHDB of this run's own database) while two shards crawl: each notices its frontier is gone,
    neither recreates it for the other; the job is requeued once, its next attempt starts from the start URL on a
    fresh frontier, and the job ends succeeded only having fetched every page."""
    import redis

    job_id = crawl(api, tree_site, parallelism=2)
    wait_pages(tree_site, tree_site.pages // 4, timeout=90, cluster=cluster)
    client = redis.Redis.from_url(settings.REDIS_URL)
    assert client.connection_pool.connection_kwargs.get("db", 0) != 0, "refusing to flush Redis database 0"
    client.flushdb()
    at_flush = sum(tree_site.page_hits().values())

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=180, cluster=cluster, why="no end")

    hits = tree_site.page_hits()
    print(
        f"parallelism 2, Redis emptied: pages at the flush {at_flush}; fetched in all {sum(hits.values())}; "
        f"fetched twice {sum(1 for count in hits.values() if count > 1)}; attempts {job.attempt}"
    )
    assert job.status == "succeeded", (job.status, job.error_message, cluster.logs())
    assert set(hits) == tree_site.all_paths()
    assert job.attempt >= 2 and job.max_attempts - job.attempt == 2, (job.attempt, job.max_attempts)
    assert Item.objects.filter(url__startswith=f"{tree_site.url}/p/").count() == tree_site.pages
    # The attempt that finished worked on its own fresh frontier: its numbers count its pages, every one of them.
    assert job.stats["pages"] >= tree_site.pages
