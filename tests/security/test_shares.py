"""Shares are shares (issue 28): an ordinary requester's `parallelism` counts against its max_active_jobs, and the
shards of one job, spread over every worker process, keep a site's per-domain concurrency cluster-wide.

End to end, against `make run`'s settings and the production settings: real worker processes (two workers of eight
pool processes each: as many as this two-core machine runs; the issue's 32 shards would only queue behind them), an
ordinary requester's token, and a site on the attacker's "public" address that counts the requests it serves at once.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings

from access.models import Requester
from crawls.models import CrawlJob
from tests.callbacks.harness import exclusive
from tests.clients import client_for
from tests.security.conftest import ATTACKER_HOST, MODES
from tests.sites import send_body
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WORKERS, POOL = 2, 8  # 16 pool processes: 16 shards of one job crawl at once
SHARDS = WORKERS * POOL
PER_DOMAIN = settings.TRAWL_THROTTLE_DEFAULTS["concurrency"]  # 8, Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN
FINISHED = ("succeeded", "failed", "cancelled", "dead")


class CountingSite:
    """Pages /p/0 .. /p/<pages-1> on ATTACKER_HOST; page i links to 4i+1 .. 4i+4. Each answer takes `delay` seconds;
    the site records how many requests it was serving at once (the most, over the whole crawl)."""

    def __init__(self, *, pages: int, delay: float) -> None:
        self.pages, self.delay = pages, delay
        self.open = self.most = self.served = 0
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                # Open from the moment the request is read until just before its answer is written: a span inside
                # the client's (it sent the request before, and reads the answer after), so a request counted here
                # was certainly in flight at the crawler. Counting until after the write would also count the
                # moments a thread of this busy process waits for the GIL after its answer was already received.
                with site.lock:
                    site.open += 1
                    site.served += 1
                    site.most = max(site.most, site.open)
                try:
                    time.sleep(site.delay)
                finally:
                    with site.lock:
                        site.open -= 1
                self.answer()

            def answer(self) -> None:
                number = int(self.path.rsplit("/", 1)[-1]) if self.path.startswith("/p/") else -1
                children = [n for n in range(4 * number + 1, 4 * number + 5) if number >= 0 and n < site.pages]
                body = "".join(f'<a href="/p/{n}">{n}</a>' for n in children).encode()
                send_body(self, 200 if number >= 0 else 404, body)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 512  # never the site's backlog that limits what the crawl opens
            daemon_threads = True

        self.server = Server((ATTACKER_HOST, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{ATTACKER_HOST}:{self.server.server_address[1]}"


@pytest.fixture
def site():
    counting = CountingSite(pages=480, delay=0.25)
    yield counting
    counting.server.shutdown()


@pytest.fixture
def fast_rule(db, throttle_keys_clean):
    """The operator lets the cluster hit the site fast: only concurrency, not the rate, holds the crawl back."""
    from throttling.services import throttle_create

    throttle_create(domain=ATTACKER_HOST, rate=1000, burst=1000, ip_rate=1000, ip_burst=1000)


@pytest.fixture
def cluster(mode, mode_web_settings, django_db_setup, django_db_blocker, redis_server, tmp_path):
    """WORKERS crawl workers of POOL processes each, with `mode`'s settings, the only consumers while the test runs."""
    workers = [
        Worker(queues="crawls,control,callbacks", concurrency=POOL, env=dict(MODES[mode]), log_dir=tmp_path)
        for _ in range(WORKERS)
    ]
    try:
        for worker in workers:
            worker.start(timeout=180)
        with exclusive(*workers):
            yield workers
    finally:
        for worker in workers:
            worker.stop()


def wait_end(job_id: str, *, timeout: float, workers: list[Worker]) -> CrawlJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = CrawlJob.objects.get(pk=job_id)
        if job.status in FINISHED:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job.status} after {timeout}s\n{stuck_report(job, workers)}")


def stuck_report(job: CrawlJob, workers: list[Worker]) -> str:
    """What a job that did not end left behind: its stats, who holds the site's in-flight slots, the workers' logs."""
    from project.redis import redis_client
    from throttling.services import throttle_buckets

    slots = redis_client().hgetall(throttle_buckets().slots_key(ATTACKER_HOST))
    logs = "\n".join(f"--- worker {n} ---\n{worker.log_tail(120)}" for n, worker in enumerate(workers))
    return f"stats: {job.stats}\nslots of {ATTACKER_HOST}: {slots}\n{logs}"


def capped_requester(name: str, cap: int):
    api = client_for(name)
    Requester.objects.filter(name=name).update(max_active_jobs=cap)
    return api


@pytest.mark.usefixtures("mode_web_settings")
def test_parallelism_counts_against_max_active_jobs(mode, builtins, fast_rule, site, cluster):
    narrow = capped_requester("one-slot", 1)
    refused = narrow.post("/api/jobs/", {"url": f"{site.url}/p/0", "parallelism": 32}, format="json")
    assert refused.status_code == 429, refused.content
    assert "at most 1" in refused.json()["detail"] and "max_active_jobs" in refused.json()["detail"]

    four = capped_requester("four-slots", 4)
    job = four.post("/api/jobs/", {"url": f"{site.url}/p/0", "parallelism": 4}, format="json")
    assert job.status_code == 201, job.content
    second = four.post("/api/jobs/", {"url": f"{site.url}/p/1"}, format="json")
    batch = four.post("/api/batches/", {"jobs": [{"url": f"{site.url}/p/2"}]}, format="json")
    assert (second.status_code, batch.status_code) == (429, 429), (second.content, batch.content)
    assert "it has 4" in second.json()["detail"]

    ended = wait_end(job.json()["id"], timeout=300, workers=cluster)

    assert ended.status == "succeeded", ended.error_message
    shards = {member.split(":")[1] for member in ended.stats["pages_by_shard"]}
    assert shards <= {"0", "1", "2", "3"}, "no more shards ran than the job's parallelism"
    again = four.post("/api/jobs/", {"url": f"{site.url}/p/3", "options": {"maxdepth": 0}}, format="json")
    assert again.status_code == 201, "an ended job gave its four slots back"
    wait_end(again.json()["id"], timeout=300, workers=cluster)
    print(f"[{mode}] cap 1: parallelism 32 refused; cap 4: parallelism 4 ran ({len(shards)} shards), a 2nd job 429")


@pytest.mark.usefixtures("mode_web_settings")
def test_sixteen_shards_keep_the_per_domain_limit_at_the_site(mode, builtins, fast_rule, site, cluster):
    api = client_for("many-shards")
    body = {"url": f"{site.url}/p/0", "parallelism": SHARDS, "options": {"maxdepth": 10}}
    response = api.post("/api/jobs/", body, format="json")
    assert response.status_code == 201, response.content

    job = wait_end(response.json()["id"], timeout=240, workers=cluster)  # under the test's timeout: the report shows

    assert job.status == "succeeded", job.error_message
    crawled = {member for member, pages in job.stats["pages_by_shard"].items() if pages}
    per_process = len(crawled) * settings.TRAWL_SCRAPY_SETTINGS["CONCURRENT_REQUESTS_PER_DOMAIN"]
    print(
        f"[{mode}] {SHARDS} shards on {WORKERS} workers x {POOL} processes; {len(crawled)} fetched pages; "
        f"{site.served} requests served; most open at once at the site: {site.most} (limit {PER_DOMAIN}; "
        f"Scrapy's per-process limit alone would allow {per_process}); "
        f"slot waits: {job.stats['throttle'].get('slot_waits', 0)}"
    )
    assert site.served >= site.pages, "every page was fetched"
    assert site.most <= PER_DOMAIN, f"{site.most} requests open at once at the site, limit {PER_DOMAIN}"
    assert len(crawled) >= 2, "the shards crawled side by side (else the limit proved nothing)"
    assert job.stats["throttle"].get("slot_waits", 0) > 0, "requests waited for a slot: the limit held them back"
