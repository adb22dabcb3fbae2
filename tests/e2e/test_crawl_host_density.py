"""With `make run`'s crawl worker (2 processes), TRAWL_CRAWLS_PER_PROCESS=16 and the default throttle of 2
requests/s for a domain without a rule, 24 throttled one-site jobs finish in at most 3 × the time one takes alone
(issue 42): they crawl at once instead of two at a time."""

from __future__ import annotations

import time

import pytest

from crawls.models import CrawlJob
from tests.callbacks.harness import running_alone
from tests.e2e.crawl_host_stack import all_ended
from tests.e2e.faults_stack import submit
from tests.e2e.frontier_stack import TreeSite
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
JOBS, PAGES = 24, 20
# make run's throttle for a domain without a rule (project/env.py), which the test settings raise for other tests.
MAKE_RUN_THROTTLE = {"TRAWL_THROTTLE_DEFAULT_RATE": "2", "TRAWL_THROTTLE_DEFAULT_BURST": "10"}
SIXTEEN_PER_PROCESS = {"TRAWL_CRAWLS_PER_PROCESS": "16"}


@pytest.fixture
def make_run_worker(django_db_setup, django_db_blocker, redis_server, throttle_keys_clean, tmp_path):
    """The Procfile's crawl worker (`-c 2`), 16 crawls per process."""
    worker = Worker(queues="crawls", concurrency=2, env={**MAKE_RUN_THROTTLE, **SIXTEEN_PER_PROCESS}, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


@pytest.fixture
def one_site_each():
    """A site per job, each a host of its own (127.0.0.2 ...): a domain, and a throttle bucket, of its own."""
    sites = [TreeSite(pages=PAGES, delay=0.0, host=f"127.0.0.{n}") for n in range(2, JOBS + 3)]
    yield sites
    for site in sites:
        site.server.shutdown()


def crawled(api, sites: list[TreeSite], worker: Worker) -> float:
    """Seconds from submitting one job per site to the last one ending; every job succeeded with every page."""
    started = time.monotonic()
    ids = [submit(api, url=f"{site.url}/p/0", options={"maxdepth": 20}) for site in sites]
    deadline = started + 600
    while (ended := all_ended(ids)) is None:
        assert time.monotonic() < deadline, worker.log_tail(100)
        time.sleep(0.1)
    seconds = time.monotonic() - started
    assert [job.status for job in ended] == ["succeeded"] * len(sites), [job.error_message for job in ended]
    assert all(len(site.page_hits()) == PAGES for site in sites)
    return seconds


def test_24_throttled_jobs_take_at_most_3_times_one_alone(api, builtins, make_run_worker, one_site_each):
    alone = crawled(api, one_site_each[:1], make_run_worker)
    together = crawled(api, one_site_each[1:], make_run_worker)
    workers = set(CrawlJob.objects.exclude(worker="").values_list("worker", flat=True))

    print(
        f"\none job alone {alone:.1f} s; {JOBS} at once {together:.1f} s ({together / alone:.2f} x) "
        f"in {len(workers)} crawl processes"
    )
    assert together <= 3 * alone
    assert len(workers) == 2  # the worker's two processes ran them all
