"""A requester's crawl must not wedge a crawl process (issue 41): polynomial XPath is refused, and a process whose
reactor stops answering is noticed, its crawls handed back, and replaced.

The attacker's site (127.0.0.2) serves a page 2,000 elements deep with 20,000 more at its bottom, on which
`//*[count(.//*[count(.//*)>1])>1]` (nodes x depth²) runs for many minutes per field in lxml. Submitted as a selector,
through the jobs API, a batch or a source, it is a 400 naming the field; written straight to the database (a job from
before the check), the spider refuses it as it starts. Spider code that runs it anyway (a scraper version an admin
registered, tests/security/stall_spider.py) holds the worker's reactor: the reactor watchdog notices within
TRAWL_REACTOR_STALL_SECONDS, hands the crawl back through its frontier and ends the pool process, which Celery
replaces; the job that does it spends its attempts and ends `failed` / `reactor_stalled`, and another requester's
one-page job submitted meanwhile finishes. Without the watchdog the reactor stays busy, the job timeout gives up
waiting, and every later job of that process starts no crawl.
"""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from access.services import token_issue
from crawls.logs.joblog import job_log_lines
from crawls.models import CrawlJob, JobStatus
from crawls.publish import publish_crawl
from registry.models import Scraper, ScraperVersion
from tests.callbacks.harness import running_alone
from tests.security.conftest import ATTACKER_HOST, MODES
from tests.security.stall_spider import POLYNOMIAL_XPATH
from tests.sites import ServedSite
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DEPTH, BOTTOM = 2000, 20_000
STALL_SECONDS = 5  # the knob, low so the test is short; the default (30) is for loaded production hosts
JOB_TIMEOUT = 60
FINAL = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.DEAD)
FIELD = "options.config.fields.price"
# Polynomial shapes a hostile requester tries, each on one of the selectors a config holds.
POLYNOMIAL = [
    {"fields": {"price": f"xpath:{POLYNOMIAL_XPATH}"}},
    {"fields": {"price": "xpath://*[count(.//*//*)>1]"}},
    {"fields": {"price": "xpath://div[.//a[contains(., 'Buy')]]/text()"}},
    {"fields": {"price": "div:has(a b)"}},
]


def deep_page() -> str:
    return "<html><body>" + "<div><a>x</a>" * DEPTH + "<p>y</p>" * BOTTOM + "</div>" * DEPTH + "</body></html>"


@pytest.fixture
def attacker_site():
    routes = {"/deep": (200, deep_page()), "/one": (200, "<html><title>one</title><p>one page</p></html>")}
    routes["/robots.txt"] = (200, "")
    with ServedSite(routes, host=ATTACKER_HOST) as site:
        yield site


@pytest.fixture
def stall_worker(mode, mode_web_settings, django_db_setup, django_db_blocker, redis_server, tmp_path):
    """A real crawl worker of `mode` (one pool process), its watchdog on a short fuse."""
    env = {**MODES[mode], "TRAWL_REACTOR_STALL_SECONDS": str(STALL_SECONDS), "TRAWL_JOB_TIMEOUT": str(JOB_TIMEOUT)}
    worker = Worker(queues="crawls,control,callbacks", concurrency=1, env=env, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def other_requester() -> APIClient:
    _, token = token_issue(requester_name="bob")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def wait_for(predicate, *, timeout: float, why: str, worker: Worker):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{why} within {timeout} s\n--- worker ---\n{worker.log_tail(120)}"
        time.sleep(0.2)
    return value


def final(job_id: str) -> CrawlJob | None:
    job = CrawlJob.objects.get(pk=job_id)
    return job if job.status in FINAL else None


@pytest.mark.parametrize("config", POLYNOMIAL)
def test_polynomial_xpath_is_a_400_naming_the_field(mode_web_settings, builtins, api, attacker_site, config):
    spec = {"url": f"{attacker_site.url}/deep", "scraper": "selectors", "options": {"config": config}}

    single = api.post("/api/jobs/", spec, format="json")
    batch = api.post("/api/batches/", {"jobs": [{"url": f"{attacker_site.url}/one"}, spec]}, format="json")

    assert single.status_code == 400, single.content
    assert "walk inside a walk" in str(single.json()["options"]["config"]["fields"]["price"]), single.json()
    assert batch.status_code == 400 and "price" in str(batch.json()["jobs"]), batch.content
    assert CrawlJob.objects.count() == 0


def test_a_stored_polynomial_xpath_is_refused_when_the_spider_starts(
    mode, stall_worker, builtins, requester, attacker_site
):
    """A job from before the check, written straight to the database: refused before any request, in seconds."""
    job = CrawlJob.objects.create(
        url=f"{attacker_site.url}/deep",
        scraper=Scraper.objects.get(name="selectors"),
        requester=requester,
        options={"config": POLYNOMIAL[0]},
    )
    publish_crawl(job=job)

    ended = wait_for(lambda: final(str(job.pk)), timeout=120, why="no outcome", worker=stall_worker)
    stall_worker.wait_idle()

    print(f"\n[{mode}] stored: {ended.status} {ended.error_class}: {ended.error_message[:160]}")
    assert ended.status == JobStatus.FAILED and FIELD.removeprefix("options.") in ended.error_message
    assert "walk inside a walk" in ended.error_message


def test_a_wedged_reactor_is_replaced_and_another_requesters_job_finishes(
    mode, stall_worker, builtins, api, attacker_site
):
    scraper = Scraper.objects.create(name="deep_walk")
    ScraperVersion.objects.create(
        scraper=scraper,
        version="1.0.0",
        spider="tests.security.stall_spider.PolynomialXPathSpider",
        is_default=True,
    )
    pool_before = set(stall_worker.pool_pids())
    hostile = api.post("/api/jobs/", {"url": f"{attacker_site.url}/deep", "scraper": "deep_walk"}, format="json")
    assert hostile.status_code == 201, hostile.content
    hostile_id = hostile.json()["id"]
    # The first stall handed the crawl back: the job runs again as attempt 2, in a new process.
    wait_for(
        lambda: CrawlJob.objects.get(pk=hostile_id).attempt >= 2, timeout=180, why="no hand-back", worker=stall_worker
    )

    other = other_requester().post("/api/jobs/", {"url": f"{attacker_site.url}/one"}, format="json")
    assert other.status_code == 201, other.content
    other_job = wait_for(lambda: final(other.json()["id"]), timeout=300, why="bob's job not done", worker=stall_worker)
    hostile_job = wait_for(lambda: final(hostile_id), timeout=300, why="the hostile job not ended", worker=stall_worker)
    stall_worker.wait_idle()

    print(
        f"\n[{mode}] bob: {other_job.status} in {other_job.duration:.1f}s; hostile: {hostile_job.status} "
        f"{hostile_job.error_class} after {hostile_job.attempt} attempts, stats {hostile_job.stats}"
    )
    assert other_job.status == JobStatus.SUCCEEDED, (other_job.error_class, other_job.error_message)
    assert hostile_job.status == JobStatus.FAILED and hostile_job.error_class == "reactor_stalled"
    assert hostile_job.attempt == hostile_job.max_attempts  # never retried past its attempts
    assert "TRAWL_REACTOR_STALL_SECONDS" in hostile_job.error_message
    assert "in parse" in hostile_job.error_message  # the spider's own frame, from the reactor's stack
    assert hostile_job.stats.get("reactor_stalls") == hostile_job.max_attempts, hostile_job.stats
    first_attempt = "\n".join(job_log_lines(job=hostile_job, attempt=1))  # the stall, in the job's own log
    assert "the reactor has not answered" in first_attempt and "in parse" in first_attempt, first_attempt[-2000:]
    assert not set(stall_worker.pool_pids()) & pool_before  # the wedged process was replaced
    assert stall_worker.alive()
