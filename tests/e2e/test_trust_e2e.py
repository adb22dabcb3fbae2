"""Trust, end to end with real workers: a live job never goes stale while the database is slow."""

from __future__ import annotations

import time

import pytest
from django.db import connection, connections
from django.utils import timezone

from crawls.models import CrawlJob
from registry.models import Scraper, ScraperVersion

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL: a lock on the items table alone, jobs stay writable"
)


def submit(api, **spec) -> str:
    response = api.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@postgres_only
def test_a_2000_item_flush_on_a_slow_database_never_lets_the_job_go_stale(api, builtins, site, job_waiter):
    """Item writes wait 8 s behind a lock (a slow database). The tick is stuck in the upsert all that time; the
    heartbeat thread must keep `heartbeat_at` fresh so the reaper never takes the live job for a dead one."""
    scraper = Scraper.objects.create(name="many")
    ScraperVersion.objects.create(
        scraper=scraper, version="1.0.0", spider="tests.fixtures.spiders.ManyItemsSpider", is_default=True
    )
    locker = connections.create_connection("default")
    locker.set_autocommit(False)
    with locker.cursor() as cursor:
        cursor.execute("LOCK TABLE crawls_item IN SHARE ROW EXCLUSIVE MODE")  # reads go on, writes wait
    try:
        job_id = submit(api, url=f"{site.url}/product-1.html", scraper="many", options={"config": {"count": 2000}})
        worst, release_at = 0.0, time.monotonic() + 8
        while time.monotonic() < release_at:
            job = CrawlJob.objects.get(pk=job_id)
            if job.status == "running" and job.heartbeat_at:
                worst = max(worst, (timezone.now() - job.heartbeat_at).total_seconds())
            time.sleep(0.2)
    finally:
        locker.rollback()
        locker.close()

    finished = job_waiter(job_id, timeout=120)
    assert finished.status == "succeeded", finished.error_message
    assert finished.stats["items_new"] == 2000
    # Heartbeats every second in tests; the reaper's stale bound is a few heartbeats.
    assert worst < 3, f"the heartbeat was {worst:.1f}s old while the flush waited for the database"
