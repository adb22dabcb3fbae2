"""Durable, parallel crawls with real worker processes and a local site that logs every request it serves.

- A worker process SIGKILLed mid-crawl: attempt 2 continues from the frontier and fetches no page twice except the
  ones in flight at the kill (read from the frontier in Redis right after the kill).
- A worker given SIGTERM hands its crawl back: another worker continues it at once, not after the heartbeat goes
  stale (the reaper here waits a minute, so only the warm shutdown can explain a short pause in the site's log).
- `parallelism: 2` over two worker processes: every page fetched once, every item stored once, both shards worked.
- Cancelling a parallel crawl stops every shard; `parallelism: 4` on two processes completes.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings

from crawls.frontier import Frontier, codec
from crawls.models import CrawlJob, JobLog
from items.models import Item
from tests.callbacks.harness import FAST_ENV, Beat, exclusive
from tests.e2e.test_faults import reaper_every
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FAST_REAPER = {**FAST_ENV, "TRAWL_REAPER_STALE_SECONDS": "3", "TRAWL_REAPER_QUEUED_SECONDS": "5"}
# A stale heartbeat takes a minute to notice: what continues a crawl sooner is the warm shutdown alone.
SLOW_REAPER = {**FAST_ENV, "TRAWL_REAPER_STALE_SECONDS": "60", "TRAWL_REAPER_QUEUED_SECONDS": "60"}
LEASE = {"TRAWL_FRONTIER_LEASE_SECONDS": "3"}
HANDOVER_GOAL_SECONDS = 10  # the "continues elsewhere within 10 s"
CONCURRENT_REQUESTS = settings.TRAWL_SCRAPY_SETTINGS["CONCURRENT_REQUESTS"]


class TreeSite:
    """Pages /p/0 .. /p/<pages-1>; page i links to 2i+1 and 2i+2 and answers after `delay` seconds.

    Logs (time.time(), path) for every request it receives, when it receives it. Listens on `host`."""

    def __init__(self, *, pages: int, delay: float, host: str = "127.0.0.1") -> None:
        self.pages, self.delay = pages, delay
        self.log: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                with site.lock:
                    site.log.append((time.time(), self.path))
                if not self.path.startswith("/p/"):
                    return self.answer(404, b"no")
                number = int(self.path.rsplit("/", 1)[-1])
                time.sleep(site.delay)
                links = "".join(f'<a href="/p/{n}">{n}</a>' for n in (2 * number + 1, 2 * number + 2) if n < site.pages)
                self.answer(200, f"<html><title>Page {number}</title><body>{links}</body></html>".encode())

            def answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def page_hits(self) -> Counter:
        with self.lock:
            return Counter(path for _, path in self.log if path.startswith("/p/"))

    def page_times(self) -> list[float]:
        with self.lock:
            return [at for at, path in self.log if path.startswith("/p/")]

    def all_paths(self) -> set[str]:
        return {f"/p/{n}" for n in range(self.pages)}


@pytest.fixture
def tree_site(request):
    pages, delay = getattr(request, "param", (63, 0.25))
    site = TreeSite(pages=pages, delay=delay)
    yield site
    site.server.shutdown()


@pytest.fixture
def fast_throttle(db, throttle_keys_clean):
    from throttling.services import throttle_create

    throttle_create(domain="127.0.0.1", rate=50, burst=50, ip_rate=50, ip_burst=50)


class Cluster:
    def __init__(self, tmp_path, *, env: dict) -> None:
        self.ops = Worker(queues="control,callbacks", concurrency=1, env=env, log_dir=tmp_path)
        self.crawlers = [Worker(queues="crawls", concurrency=1, env=env, log_dir=tmp_path) for _ in range(2)]
        self.beat = Beat(log_dir=tmp_path, env=env)

    def logs(self) -> str:
        parts = [f"--- ops ---\n{self.ops.log_tail()}", f"--- beat ---\n{self.beat.log_tail()}"]
        parts += [f"--- crawler {n} ---\n{worker.log_tail(120)}" for n, worker in enumerate(self.crawlers)]
        return "\n".join(parts)

    def crawler_of(self, job: CrawlJob) -> Worker:
        pid = int(job.worker.rsplit("/", 1)[-1])
        return next(worker for worker in self.crawlers if pid in worker.pool_pids())


def _cluster(tmp_path, env: dict):
    reaper_every(1)
    cluster = Cluster(tmp_path, env={**env, **LEASE})
    try:
        for worker in (cluster.ops, *cluster.crawlers):
            worker.start()
        with exclusive(cluster.ops, *cluster.crawlers):
            cluster.beat.start()
            yield cluster
    finally:
        cluster.beat.stop()
        for worker in (*cluster.crawlers, cluster.ops):
            worker.stop()


@pytest.fixture
def cluster(django_db_setup, django_db_blocker, redis_server, tmp_path):
    yield from _cluster(tmp_path, FAST_REAPER)


@pytest.fixture
def slow_reaper_cluster(django_db_setup, django_db_blocker, redis_server, tmp_path):
    yield from _cluster(tmp_path, SLOW_REAPER)


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


def wait_pages(site: TreeSite, count: int, *, timeout: float, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout
    while sum(site.page_hits().values()) < count:
        assert time.monotonic() < deadline, f"fewer than {count} pages fetched\n{cluster.logs()}"
        time.sleep(0.05)


def in_flight_paths(job_id) -> set[str]:
    payloads = Frontier(job_id).inflight_payloads()
    return {"/" + codec.decode_dict(payload)["url"].split("/", 3)[-1] for payload in payloads}


def crawl(api, site: TreeSite, **extra) -> str:
    return submit(api, url=f"{site.url}/p/0", options={"maxdepth": 20}, **extra)


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
    hits = tree_site.page_hits()
    assert set(hits) == tree_site.all_paths()
    twice = {path for path, count in hits.items() if count > 1}
    assert twice <= in_flight, f"fetched again though not in flight at the kill: {sorted(twice - in_flight)}"
    # "In flight" includes pages fetched whose items were not stored yet: they are fetched again, so no item is lost.
    # The scheduler holds at most CONCURRENT_REQUESTS of them, so no more pages than that are fetched twice.
    assert len(in_flight) <= CONCURRENT_REQUESTS, sorted(in_flight)
    assert Item.objects.filter(url__startswith=f"{tree_site.url}/p/").count() == tree_site.pages
    # Stats accumulate over the attempts: every item counted (a refetched page's item once more, as unchanged).
    assert tree_site.pages <= job.stats["items"] <= tree_site.pages + len(twice)
    assert job.stats["pages"] <= tree_site.pages + len(twice)
    assert job.stats["attempts"] == 2
    # The rest goes at its end: a follow-up of job_end, run by the worker right after the final state is committed.
    frontier, deadline = Frontier(job_id), time.monotonic() + 10
    while (keys := list(frontier.redis.scan_iter(frontier.key("*")))) != [frontier.key("ended").encode()]:
        assert time.monotonic() < deadline, f"frontier keys left after the job ended: {sorted(keys)}"
        time.sleep(0.1)


@pytest.mark.parametrize("whole_group", [True, False], ids=["process-group", "main-process-only"])
def test_a_crawl_whose_worker_gets_sigterm_continues_on_another_worker_at_once(
    api, builtins, fast_throttle, tree_site, slow_reaper_cluster, whole_group
):
    crawl_handed_over(api, tree_site, slow_reaper_cluster, whole_group=whole_group)


def crawl_handed_over(api, tree_site: TreeSite, cluster: Cluster, *, whole_group: bool, **extra) -> CrawlJob:
    """Start a crawl, SIGTERM its worker a few pages in, check that another worker finished it at once."""
    job_id = crawl(api, tree_site, **extra)
    running = wait_job(job_id, lambda j: j.status == "running", timeout=60, cluster=cluster, why="never started")
    wait_pages(tree_site, 15, timeout=60, cluster=cluster)
    stopping = cluster.crawler_of(running)
    if whole_group:  # what a terminal's Ctrl-C or `kill -- -pgid` sends
        os.killpg(os.getpgid(stopping.process.pid), signal.SIGTERM)
    else:  # what `docker stop` or systemd sends: the worker forwards it to the pool process that crawls
        stopping.process.send_signal(signal.SIGTERM)

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=50, cluster=cluster, why="no end")

    assert (job.status, job.attempt) == ("succeeded", 2), job.error_message
    assert job.worker != running.worker
    times = sorted(tree_site.page_times())
    longest_pause = max(later - earlier for earlier, later in itertools.pairwise(times))
    # Measured from the site's own request log: the handover pause, not a heartbeat timeout (a minute here).
    assert longest_pause < HANDOVER_GOAL_SECONDS, f"the crawl paused {longest_pause:.1f}s\n{cluster.logs()}"
    print(f"SIGTERM handover: longest pause in the site's request log {longest_pause:.2f} s")
    hits = tree_site.page_hits()
    assert set(hits) == tree_site.all_paths()
    assert sum(hits.values()) - tree_site.pages <= CONCURRENT_REQUESTS  # only those in flight at the SIGTERM again
    assert stopping.process.wait(30) is not None  # the warm shutdown ended: the crawl did not hold the worker
    return job


def test_parallelism_2_over_two_processes_fetches_every_page_once(api, builtins, fast_throttle, tree_site, cluster):
    job_id = crawl(api, tree_site, parallelism=2)

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=90, cluster=cluster, why="no end")

    assert job.status == "succeeded", job.error_message
    hits = tree_site.page_hits()
    assert hits == Counter(tree_site.all_paths())  # every page exactly once
    items = Item.objects.filter(url__startswith=f"{tree_site.url}/p/")
    assert items.count() == tree_site.pages
    assert job.stats["items"] == tree_site.pages and job.stats["pages"] == tree_site.pages
    # Each concurrency-1 worker ran one shard at a time, so two shards with pages means two processes worked.
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
    for worker in cluster.crawlers:
        assert " succeeded in " in worker.log_tail(400), worker.log_tail()  # each shard's task returned


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
