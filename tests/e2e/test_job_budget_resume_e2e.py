"""A job's `max_pages` across its attempts, with real workers: its worker process SIGKILLed mid-crawl, the job resumed
by another from its frontier, and the site's own request log counting what was fetched in all."""

from __future__ import annotations

import os
import signal

import pytest

from tests.e2e.faults_stack import submit
from tests.e2e.frontier_stack import cluster, fast_throttle, tree_site, wait_job, wait_pages

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["cluster", "fast_throttle", "tree_site"]  # fixtures
MAX_PAGES = 5


@pytest.mark.parametrize("tree_site", [(63, 1.0)], indirect=True)  # slow pages: the kill lands mid-crawl
def test_max_pages_5_holds_across_a_sigkilled_attempt_and_its_resumption(
    api, builtins, fast_throttle, tree_site, cluster
):
    job_id = submit(api, url=f"{tree_site.url}/p/0", options={"maxdepth": 20, "max_pages": MAX_PAGES})
    running = wait_job(job_id, lambda j: j.status == "running", timeout=60, cluster=cluster, why="never started")
    wait_pages(tree_site, 2, timeout=60, cluster=cluster)
    os.kill(int(running.worker.rsplit("/", 1)[-1]), signal.SIGKILL)
    fetched_by_the_first = sum(tree_site.page_hits().values())

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=90, cluster=cluster, why="no end")

    assert (job.status, job.attempt) == ("succeeded", 2), f"{job.error_message}\n{cluster.logs()}"
    assert job.stats["closed_by"] == "max_pages"
    assert fetched_by_the_first < MAX_PAGES  # the first attempt was killed before its budget was spent
    assert sum(tree_site.page_hits().values()) <= MAX_PAGES, tree_site.page_hits()


def test_max_pages_5_is_the_jobs_not_each_shards(api, builtins, fast_throttle, tree_site, cluster):
    job_id = submit(api, url=f"{tree_site.url}/p/0", parallelism=2, options={"maxdepth": 20, "max_pages": MAX_PAGES})

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=90, cluster=cluster, why="no end")

    assert job.status == "succeeded", f"{job.error_message}\n{cluster.logs()}"
    assert job.stats["closed_by"] == "max_pages"
    assert sum(tree_site.page_hits().values()) <= MAX_PAGES, tree_site.page_hits()
