"""What the crawl host tests start (tests/e2e/test_crawl_host*.py): crawl workers whose processes each run several
crawls at once (TRAWL_CRAWLS_PER_PROCESS, project/pools/crawlhost.py), an ops worker and beat (the reaper), and
spiders that misbehave on purpose."""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

import pytest
import redis
import scrapy

from crawls.logs.joblog import job_log_lines
from crawls.models import CrawlJob
from registry.models import Scraper, ScraperVersion
from tests.e2e.faults_stack import reaper_every
from tests.e2e.frontier_stack import FAST_REAPER, LEASE, SLOW_REAPER, Cluster, TreeSite, cluster_run
from tests.workers import Worker

STALL_SECONDS = 5  # the watchdog's fuse, short so the test is; production's default is TRAWL_REACTOR_STALL_SECONDS
SPIN_LIMIT_SECONDS = 600  # a spinning callback gives up after this: a broken watchdog fails the test, never hangs it
FINAL = ("succeeded", "failed", "cancelled", "dead")


class SpinningSpider(scrapy.Spider):
    """Spider code that holds its reactor: its callback spins the CPU (importable by worker subprocesses)."""

    name = "spinning"

    def parse(self, response):
        until = time.monotonic() + SPIN_LIMIT_SECONDS
        while time.monotonic() < until:
            pass
        yield {"url": response.url}


HOG_BYTES = 400 * 1024 * 1024


class MemoryHogSpider(scrapy.Spider):
    """Holds 400 MiB from its first page on, the first time a page of its site is parsed anywhere (a Redis key says
    so): a crawl that makes its process grow, once."""

    name = "memory_hog"

    def parse(self, response):
        site = urlsplit(response.url).netloc
        first = redis.Redis.from_url(os.environ["REDIS_URL"]).set(f"test:hog:{site}", 1, nx=True, ex=600)
        if first:
            self.held = b"x" * HOG_BYTES  # written, so resident
        yield {"url": response.url}
        yield from response.follow_all(css="a", callback=self.parse)


class GreedySpider(scrapy.Spider):
    """Holds 400 MiB from its first page on, on every attempt: a crawl whose every process grows past the bound."""

    name = "greedy"

    def parse(self, response):
        self.held = getattr(self, "held", None) or b"x" * HOG_BYTES
        yield {"url": response.url}
        yield from response.follow_all(css="a", callback=self.parse)


class GaugedSite(TreeSite):
    """A TreeSite that also counts the page requests it is answering at once (`most`: the highest count seen).

    A request is open from the moment it is read until just before its answer is written: a span inside the
    client's, so a request counted here was certainly in flight at the crawler. Counting until after the write would
    also count the moments a handler thread of this busy test process waits for the GIL after the crawler already
    has its answer (and has sent its next request)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.in_flight = self.most = 0
        handler, site = self.server.RequestHandlerClass, self
        answer_get, send = handler.do_GET, handler.answer

        def closed(request) -> None:
            if getattr(request, "counted", False):
                request.counted = False
                with site.lock:
                    site.in_flight -= 1

        def do_GET(request) -> None:
            request.counted = request.path.startswith("/p/")
            if request.counted:
                with site.lock:
                    site.in_flight += 1
                    site.most = max(site.most, site.in_flight)
            try:
                answer_get(request)
            finally:
                closed(request)

        def answer(request, code: int, body: bytes) -> None:
            closed(request)
            send(request, code, body)

        handler.do_GET, handler.answer = do_GET, answer


class HostCluster(Cluster):
    """`crawlers` crawl workers of one process each, running `per_process` crawls at once; ops worker; beat."""

    def __init__(self, tmp_path, *, env: dict, crawlers: int, per_process: int) -> None:
        super().__init__(tmp_path, env=env)
        env = {**env, "TRAWL_CRAWLS_PER_PROCESS": str(per_process)}
        self.crawlers = [Worker(queues="crawls", concurrency=1, env=env, log_dir=tmp_path) for _ in range(crawlers)]

    def pid_of(self, job: CrawlJob) -> int:
        return int(job.worker.rsplit("/", 1)[-1])


def host_cluster(tmp_path, *, reaper: dict, crawlers: int, per_process: int, **extra: str):
    reaper_every(1)
    env = {**reaper, **LEASE, "TRAWL_REACTOR_STALL_SECONDS": str(STALL_SECONDS), **extra}
    yield from cluster_run(HostCluster(tmp_path, env=env, crawlers=crawlers, per_process=per_process))


@pytest.fixture
def eight_per_process(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """One crawl worker, one process running up to 8 crawls; the reaper quick."""
    yield from host_cluster(tmp_path, reaper=FAST_REAPER, crawlers=1, per_process=8)


@pytest.fixture
def two_per_process(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """One crawl worker, one process running up to 2 crawls."""
    yield from host_cluster(tmp_path, reaper=FAST_REAPER, crawlers=1, per_process=2)


@pytest.fixture
def memory_bound(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """One crawl worker, one process of 4 crawls, recycled past ~340 MiB resident (a crawl process is ~150 MiB)."""
    yield from host_cluster(
        tmp_path, reaper=SLOW_REAPER, crawlers=1, per_process=4, TRAWL_WORKER_MAX_MEMORY_KB="350000"
    )


@pytest.fixture
def two_hosts(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """Two crawl workers of one process each, 4 crawls per process; the reaper slow (only a hand-back is quick)."""
    yield from host_cluster(tmp_path, reaper=SLOW_REAPER, crawlers=2, per_process=4)


def scraper_with(name: str, spider: str, **settings) -> Scraper:
    scraper = Scraper.objects.create(name=name)
    ScraperVersion.objects.create(scraper=scraper, version="1.0.0", spider=spider, is_default=True, settings=settings)
    return scraper


def wait_until(predicate, *, timeout: float, why: str, cluster: Cluster):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{why} within {timeout} s\n{cluster.logs()}"
        time.sleep(0.1)
    return value


def jobs_of(ids: list[str]) -> list[CrawlJob]:
    by_id = {str(job.pk): job for job in CrawlJob.objects.filter(pk__in=ids)}
    return [by_id[job_id] for job_id in ids]


def all_ended(ids: list[str]) -> list[CrawlJob] | None:
    jobs = jobs_of(ids)
    return jobs if all(job.status in FINAL for job in jobs) else None


def wait_ended(ids: list[str], *, cluster: HostCluster, timeout: float) -> list[CrawlJob]:
    """The jobs once every one has ended, and their workers are idle (their logs stored, their follow-ups run)."""
    ended = wait_until(lambda: all_ended(ids), timeout=timeout, why="not every crawl ended", cluster=cluster)
    for worker in cluster.crawlers:
        worker.wait_idle()
    return ended


def whole_log(job: CrawlJob) -> str:
    """Every attempt's log of the job."""
    return "\n".join("\n".join(job_log_lines(job=job, attempt=n)) for n in range(1, job.attempt + 1))
