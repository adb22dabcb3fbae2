"""Durable crawls with real worker processes and a local site that logs every request it serves.

- A worker process SIGKILLed mid-crawl: attempt 2 continues from the frontier and fetches no page twice except the
  ones in flight at the kill (read from the frontier in Redis right after the kill).
- A worker given SIGTERM hands its crawl back: another worker continues it at once, not after the heartbeat goes
  stale (the reaper here waits a minute, so only the warm shutdown can explain a short pause in the site's log).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from crawls.services.shards import job_frontier
from items.models import Item
from tests.e2e.frontier_stack import (
    CONCURRENT_REQUESTS,
    cluster,
    crawl,
    crawl_handed_over,
    fast_throttle,
    fetched_twice_only_in_flight,
    in_flight_paths,
    slow_reaper_cluster,
    tree_site,
    wait_job,
    wait_pages,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["cluster", "fast_throttle", "slow_reaper_cluster", "tree_site"]  # fixtures


def test_a_killed_crawl_resumes_from_its_frontier_and_fetches_only_in_flight_pages_again(
    api, builtins, fast_throttle, tree_site, cluster
):
    job_id = crawl(api, tree_site)
    running = wait_job(job_id, lambda j: j.status == "running", timeout=60, cluster=cluster, why="never started")
    wait_pages(tree_site, 20, timeout=60, cluster=cluster)
    os.kill(int(running.worker.rsplit("/", 1)[-1]), signal.SIGKILL)
    in_flight = in_flight_paths(job_id)  # nothing changes them until attempt 2 starts: the process is gone

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=90, cluster=cluster, why="no end")

    assert (job.status, job.attempt) == ("succeeded", 2), job.error_message
    twice = fetched_twice_only_in_flight(tree_site, in_flight)
    # "In flight" includes pages fetched whose items were not stored yet: they are fetched again, so no item is lost.
    # The scheduler holds at most CONCURRENT_REQUESTS of them, so no more pages than that are fetched twice.
    assert len(in_flight) <= CONCURRENT_REQUESTS, sorted(in_flight)
    assert Item.objects.filter(url__startswith=f"{tree_site.url}/p/").count() == tree_site.pages
    # Stats accumulate over the attempts: every item counted (a refetched page's item once more, as unchanged).
    assert tree_site.pages <= job.stats["items"] <= tree_site.pages + len(twice)
    assert job.stats["pages"] <= tree_site.pages + len(twice)
    assert job.stats["attempts"] == 2
    # The rest goes at its end: a follow-up of job_end, run by the worker right after the final state is committed.
    frontier, deadline = job_frontier(job_id), time.monotonic() + 10
    while (keys := list(frontier.redis.scan_iter(frontier.key("*")))) != [frontier.key("ended").encode()]:
        assert time.monotonic() < deadline, f"frontier keys left after the job ended: {sorted(keys)}"
        time.sleep(0.1)


@pytest.mark.parametrize("whole_group", [True, False], ids=["process-group", "main-process-only"])
def test_a_crawl_whose_worker_gets_sigterm_continues_on_another_worker_at_once(
    api, builtins, fast_throttle, tree_site, slow_reaper_cluster, whole_group
):
    crawl_handed_over(api, tree_site, slow_reaper_cluster, whole_group=whole_group)
