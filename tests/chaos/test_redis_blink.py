"""Chaos at speed: Redis stopped under a running 2,000-page crawl and started again three seconds later — empty
(no persistence, like a crashed cache) or from its append-only file (as `make run` and docker-compose run it).

The crawl worker's main process must survive the reconnection (kombu's Redis transport has crashed it with
`AttributeError: 'NoneType' object has no attribute 'hostname'`), and the job must end having fetched every page of
the site — or fail — never `succeeded` with part of it. With the append-only file nothing is lost: the crawl goes on
from its frontier, and no page is fetched twice beyond the requests that were in flight.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.conf import settings

from project.redis.server import redis_start_if_absent
from tests.callbacks.harness import Beat
from tests.chaos.harness import write_wide_site
from tests.e2e.faults_stack import Cluster, PrivateRedis, PrivateWorker, reaper_every
from tests.sites import LocalSite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

LISTS, PER_LIST = 40, 49  # the index, 40 list pages, 1,960 products: 2,001 pages, two links deep


@pytest.fixture
def big_site(tmp_path):
    root = tmp_path / "site"
    write_wide_site(root, lists=LISTS, per_list=PER_LIST)
    with LocalSite(root) as site:
        yield site


def site_pages(site: LocalSite) -> set[str]:
    return {f"/{path.name}" for path in site.root.glob("*.html")}


class AppendOnlyRedis(PrivateRedis):
    """The same private server, keeping its data in an append-only file as `make run`'s Redis does."""

    def start(self) -> AppendOnlyRedis:
        self.process = redis_start_if_absent(self.url, log_path=self.log, data_dir=str(Path(self.log).parent / "aof"))
        assert self.process is not None, f"something already answers on port {self.port}"
        return self


@pytest.mark.parametrize("persistence", ["empty", "aof"])
def test_redis_restarted_under_a_fast_crawl_leaves_every_process_up_and_loses_no_page(
    persistence, builtins, requester, big_site, tmp_path, monkeypatch
):
    from crawls.services.jobs import job_create
    from project.celery import app

    redis = (PrivateRedis if persistence == "empty" else AppendOnlyRedis)(tmp_path).start()

    def publish_to_private_redis(work, **options):
        with app.connection_for_write(redis.url) as connection:
            return work.apply_async(connection=connection, **options)

    monkeypatch.setattr("project.messaging.messages.send", publish_to_private_redis)
    reaper_every(1)
    ops = PrivateWorker(queues="control,callbacks", concurrency=1, broker_url=redis.url, log_dir=tmp_path)
    crawler = PrivateWorker(queues="crawls", concurrency=2, broker_url=redis.url, log_dir=tmp_path)
    beat = Beat(log_dir=tmp_path, env=dict(crawler.extra_env))
    cluster = Cluster(ops, [crawler], beat)
    try:
        ops.start(), crawler.start(), beat.start()
        job = job_create(url=f"{big_site.url}/index.html", requester=requester, options={"maxdepth": 2})
        deadline = time.monotonic() + 120
        while sum(big_site.hits.values()) < 500:
            assert time.monotonic() < deadline, f"the crawl never reached 500 pages\n{cluster.logs()}"
            time.sleep(0.05)
        at_kill = sum(big_site.hits.values())
        redis.stop()
        time.sleep(3)
        redis.start()
        back_at, before = time.monotonic(), sum(big_site.hits.values())
        deadline = back_at + 300
        recovered_after = None
        while True:
            job.refresh_from_db()
            if recovered_after is None and sum(big_site.hits.values()) > before:
                recovered_after = time.monotonic() - back_at
            if job.status in ("succeeded", "failed", "cancelled", "dead"):
                break
            assert time.monotonic() < deadline, f"job still {job.status} 300 s after Redis came back\n{cluster.logs()}"
            time.sleep(0.2)
        alive = {name: worker.process.poll() is None for name, worker in (("ops", ops), ("crawl", crawler))}
        logs = cluster.logs()
    finally:
        for process in (beat, crawler, ops):
            process.stop()
        redis.stop()

    pages = site_pages(big_site)
    fetched = {path for path in big_site.hits if path in pages}
    twice = sum(count - 1 for path, count in big_site.hits.items() if path in pages and count > 1)
    print(
        f"\nredis blink ({persistence}): {len(pages)} pages, killed at {at_kill} requests,"
        f" first page {recovered_after or -1:.1f}s after Redis was back, job {job.status} at attempt {job.attempt},"
        f" {len(fetched)} pages fetched, {twice} twice"
    )
    assert all(alive.values()), f"a worker's main process exited: {alive}\n{logs}"
    assert "Unrecoverable error" not in logs, logs
    assert job.status in ("succeeded", "failed"), (job.status, job.error_class, job.error_message)
    if job.status == "succeeded":
        assert fetched == pages, f"succeeded with {len(fetched)} of {len(pages)} pages: {sorted(pages - fetched)[:20]}"
    if persistence == "aof":
        assert job.status == "succeeded", (job.error_class, job.error_message)
        in_flight = settings.TRAWL_SCRAPY_SETTINGS["CONCURRENT_REQUESTS"]
        assert twice <= in_flight, f"{twice} pages fetched twice: the crawl did not go on from its frontier"
