"""Real worker processes crawl one local site; the site itself records when each request arrived."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from tests.callbacks.harness import exclusive
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.sites import ServedSite
from tests.throttling.buckets_helpers import flush_throttle_keys, most_in_any_window
from tests.workers import ONE_CRAWL_PER_PROCESS, Worker
from throttling.models import DomainThrottle
from throttling.services import throttle_create, throttle_delete

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FANOUT_LAST = 200  # /a/N links to /a/2N+1 and /a/2N+2 below this


class StampedSite(ServedSite):
    """`/<tree>/N` pages (two links each, a binary tree) and `/chain/N` (one link on). Stamps every arrival."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                with site.lock:
                    site.arrivals.append((time.time(), self.path))
                body = site.page(self.path).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        # By name, so its throttle rule ("localhost") touches no other test's site on 127.0.0.1.
        super().__init__(Handler, host="localhost")

    @staticmethod
    def page(path: str) -> str:
        if path == "/robots.txt":
            return "User-agent: *\nDisallow:\n"
        tree, _, number = path.strip("/").partition("/")
        n = int(number or 0)
        targets = [n + 1] if tree == "chain" else [2 * n + 1, 2 * n + 2] if n < FANOUT_LAST else []
        links = "".join(f'<a href="/{tree}/{target}">{target}</a> ' for target in targets)
        return f"<html><title>{tree} {n}</title><body>{links}</body></html>"

    def times(self, *, since: float = 0.0, until: float = float("inf")) -> list[float]:
        with self.lock:
            return [at for at, _ in self.arrivals if since <= at < until]


@pytest.fixture
def stamped_site():
    with StampedSite() as site:
        yield site


@pytest.fixture(scope="module")
def two_workers(django_db_setup, django_db_blocker, redis_server, tmp_path_factory):
    """Two hosts, one crawl each: a worker's crawl host has TRAWL_CRAWLS_PER_PROCESS slots and prefetches as many, so
    with the default either worker may take both jobs, and the limit across processes would go untested."""
    log_dir = tmp_path_factory.mktemp("throttle-workers")
    workers = [Worker(queues="crawls", log_dir=log_dir, env=ONE_CRAWL_PER_PROCESS) for _ in range(2)]
    try:
        for worker in workers:
            worker.start()
        with exclusive(*workers):
            yield workers
    finally:
        for worker in workers:
            worker.stop()


@pytest.fixture
def localhost_rule(two_workers):
    """The site's throttle rule, made through the service (so Redis has it at once) and removed the same way."""
    flush_throttle_keys()

    def make(**limits) -> DomainThrottle:
        return throttle_create(domain="localhost", **limits)

    yield make
    for throttle in DomainThrottle.objects.filter(domain="localhost"):
        throttle_delete(throttle=throttle)
    flush_throttle_keys()


@pytest.fixture
def admin_api(db):
    return client_for("ops", admin=True)


def submit(api, url: str, **options) -> str:
    response = api.post("/api/jobs/", {"url": url, "options": options}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def finished(job_id: str, workers: list[Worker]):
    try:
        return wait_for_job(job_id, timeout=240)
    except AssertionError as exc:
        logs = "\n".join(worker.log_tail() for worker in workers)
        raise AssertionError(f"{exc}\n--- worker logs ---\n{logs}") from None


def wait_for_hits(site: StampedSite, count: int, *, since: float = 0.0, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(site.times(since=since)) < count:
        assert time.monotonic() < deadline, f"the site saw only {len(site.times(since=since))} of {count} requests"
        time.sleep(0.05)


def test_two_workers_together_never_exceed_the_sites_rate(api, builtins, stamped_site, localhost_rule, two_workers):
    rate, burst = 2, 2
    localhost_rule(rate=rate, burst=burst, ip_rate=rate, ip_burst=burst)

    ids = [submit(api, f"{stamped_site.url}/{tree}/0", maxdepth=3) for tree in ("a", "b")]
    jobs = [finished(job_id, two_workers) for job_id in ids]

    assert [job.status for job in jobs] == ["succeeded", "succeeded"], [job.error_message for job in jobs]
    assert len({job.worker for job in jobs}) == 2, "each job should run on its own worker"
    assert max(job.started_at for job in jobs) < min(job.finished_at for job in jobs), "the crawls should overlap"
    arrivals = stamped_site.times()
    assert len(arrivals) >= 2 * 15, "each crawl fetches 15 pages (depth 0..3 of a binary tree)"
    assert most_in_any_window(arrivals, 1.0) <= rate + burst
    assert sum(job.stats["throttle"].get("waits", 0) for job in jobs) > 0, "the waits should show in job stats"


def test_a_rule_changed_in_the_api_applies_to_a_running_crawl(
    api, admin_api, builtins, stamped_site, localhost_rule, two_workers
):
    localhost_rule(rate=5, burst=1, ip_rate=5, ip_burst=1)
    job_id = submit(api, f"{stamped_site.url}/chain/0", maxdepth=20)
    wait_for_hits(stamped_site, 8)

    # Each change is in force once its PATCH has answered: requests the site saw while a slow PATCH ran (at the rate
    # before it) are not counted against the new rule.
    assert admin_api.patch("/api/throttles/localhost/", {"rate": 0.5}, format="json").status_code == 200
    slowed_at = time.time()
    wait_for_hits(stamped_site, 4, since=slowed_at)
    assert admin_api.patch("/api/throttles/localhost/", {"blocked": True}, format="json").status_code == 200
    blocked_at = time.time()
    job = finished(job_id, two_workers)

    slowed = stamped_site.times(since=slowed_at, until=blocked_at)
    # The bucket holds at most 1 token (burst) and one request may already be on its way: 2 + 0.5/s × 4 s.
    assert most_in_any_window(slowed, 4.0) <= 2 + 0.5 * 4
    assert len(stamped_site.times(since=blocked_at)) <= 1, "after blocking, only a request already sent may arrive"
    assert job.finished_at is not None
