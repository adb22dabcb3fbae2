"""Redis emptied mid-crawl: the job's frontier (queue, seen-set, in-flight requests) goes with it. The crawl must not
finish what little its shard still knows and end `succeeded` with part of the site: it notices the loss (the
frontier's epoch is gone), and the job starts again from its start URL as a new attempt, which fetches every page.

A requester's 2,000-page crawl on its own site (127.0.0.2, see conftest.py) through a real worker, with the settings
`make run` ships and with the production settings; this test's own Redis database is flushed (FLUSHDB: the frontier,
the throttle buckets and the broker's keys alike) when about a quarter of the site has been fetched.
"""

from __future__ import annotations

import time

import pytest
import redis
from django.conf import settings

from crawls.models import CrawlJob
from items.models import Item
from tests.e2e.frontier_stack import TreeSite
from tests.security.conftest import ATTACKER_HOST

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PAGES = 2000
FLUSH_AT = PAGES // 4
FINAL = ("succeeded", "failed", "cancelled", "dead")


@pytest.fixture
def attacker_site(mode_web_settings):
    site = TreeSite(pages=PAGES, delay=0.0, host=ATTACKER_HOST)
    yield site
    site.server.shutdown()
    site.server.server_close()


def flush_test_redis() -> None:
    """Empty this test run's own Redis database (never the server: other tests and people use its other databases)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    assert client.connection_pool.connection_kwargs.get("db", 0) != 0, "refusing to flush Redis database 0"
    client.flushdb()


def fetched(site: TreeSite) -> int:
    return sum(site.page_hits().values())


def wait_until(predicate, *, timeout: float, why: str, worker) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{why} within {timeout} s\n--- worker ---\n{worker.log_tail(120)}"
        time.sleep(0.02)


def test_redis_emptied_mid_crawl_never_ends_the_job_succeeded_with_part_of_the_site(
    attacker_site, mode_worker, api, builtins, mode
):
    site = attacker_site
    response = api.post("/api/jobs/", {"url": f"{site.url}/p/0", "options": {"maxdepth": 20}}, format="json")
    assert response.status_code == 201, response.content
    job_id = response.json()["id"]

    wait_until(lambda: fetched(site) >= FLUSH_AT, timeout=180, why="a quarter never fetched", worker=mode_worker)
    flush_test_redis()
    at_flush = fetched(site)
    wait_until(
        lambda: CrawlJob.objects.get(pk=job_id).status in FINAL, timeout=240, why="no outcome", worker=mode_worker
    )
    mode_worker.wait_idle()

    job = CrawlJob.objects.get(pk=job_id)
    hits = site.page_hits()
    twice = sum(1 for count in hits.values() if count > 1)
    print(
        f"[{mode}] pages at the flush {at_flush}; fetched in all {fetched(site)} ({len(hits)} distinct of "
        f"{PAGES}); fetched twice {twice}; attempts {job.attempt}; status {job.status}"
    )
    assert job.status in ("succeeded", "failed"), (job.status, job.error_class, job.error_message)
    if job.status == "succeeded":  # then the site saw every page: the job started again rather than end on a part
        assert set(hits) == site.all_paths(), f"succeeded having fetched {len(hits)} of {PAGES} pages"
    # What Trawl does: the frontier's loss is an infrastructure fault, never the site's: a new attempt (not counted
    # against the job's attempts) from the start URL, which stores every page's item once.
    assert (job.status, job.error_class) == ("succeeded", ""), job.error_message
    assert job.attempt >= 2 and job.max_attempts - job.attempt == 2, (job.attempt, job.max_attempts)
    assert Item.objects.filter(url__startswith=f"{site.url}/p/").count() == PAGES
    first = api.get(f"/api/jobs/{job_id}/log/", {"attempt": 1}).content.decode()  # what it logged after the flush
    # Said by whichever saw the loss first: the crawl's scheduler ("the job's frontier is gone from Redis") or the
    # task, at its tick or as the crawl ended ("the frontier of job ... is gone from Redis").
    assert "is gone from Redis" in first, first[-3000:]
