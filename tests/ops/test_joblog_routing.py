"""Job logs of several crawls in one process (TRAWL_CRAWLS_PER_PROCESS): each record goes to its own crawl's log."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest
from django.db import connections

from crawls.logs.joblog import job_log_capture, job_log_forget, job_log_lines
from crawls.models import CrawlJob, JobStatus
from registry.models import Scraper
from runtime.bridge.logcapture import job_log_crawler, job_log_current, job_log_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def jobs(requester, builtins):
    made = [
        CrawlJob.objects.create(
            url=f"http://shop{n}.test/",
            scraper=Scraper.objects.get(name="link"),
            requester=requester,
            status=JobStatus.RUNNING,
        )
        for n in range(2)
    ]
    yield made
    job_log_forget(jobs=[(job.pk, 2) for job in made])


def spider_of(crawler: SimpleNamespace) -> SimpleNamespace:
    """What Scrapy's records carry as `spider`: an object whose `crawler` is its crawl's."""
    spider = SimpleNamespace(crawler=crawler)
    crawler.spider = spider
    return spider


def crawl_thread(job, *, crawler, started: threading.Barrier, logged: threading.Barrier, captures: dict) -> None:
    """A crawl's task thread: its log captured while another crawl's runs beside it."""
    try:
        with job_log_capture(job_id=job.pk, attempt=1):
            job_log_crawler(lambda: crawler)
            captures[job.pk] = job_log_current()
            started.wait()
            logging.getLogger("trawl.jobs").info("task thread of %s", job.url)
            logged.wait()
    finally:
        connections.close_all()  # this thread's, opened to store the log


def test_records_go_to_their_own_crawl_and_ambiguous_ones_to_none(jobs):
    crawlers = [SimpleNamespace(name=f"crawler{n}") for n in range(2)]
    spiders = [spider_of(crawler) for crawler in crawlers]
    started, logged, captures = threading.Barrier(3), threading.Barrier(3), {}
    threads = [
        threading.Thread(
            target=crawl_thread,
            args=(job,),
            kwargs=dict(crawler=crawler, started=started, logged=logged, captures=captures),
        )
        for job, crawler in zip(jobs, crawlers, strict=True)
    ]
    for thread in threads:
        thread.start()
    started.wait()
    # This thread plays the reactor's: spider records, a crawl's start-up records, one of nobody's.
    scrapy_logger = logging.getLogger("scrapy.core.engine")
    for job, spider in zip(jobs, spiders, strict=True):
        scrapy_logger.info("Spider opened on %s", job.url, extra={"spider": spider})
    with job_log_thread(captures[jobs[1].pk]):
        logging.getLogger("scrapy.middleware").info("Enabled extensions for %s", jobs[1].url)
    logging.getLogger("trawl.throttle").info("a record of no crawl")
    logged.wait()
    for thread in threads:
        thread.join(10)

    first, second = (job_log_lines(job=job) for job in jobs)
    assert {line.split(" ", 3)[3] for line in first} == {
        f"task thread of {jobs[0].url}",
        f"Spider opened on {jobs[0].url}",
    }
    assert {line.split(" ", 3)[3] for line in second} == {
        f"task thread of {jobs[1].url}",
        f"Spider opened on {jobs[1].url}",
        f"Enabled extensions for {jobs[1].url}",
    }
    assert logging.getLogger("scrapy").level == logging.WARNING  # levels restored once the last crawl is out


def test_with_one_crawl_in_the_process_every_record_is_its_own_as_before(jobs):
    job = jobs[0]
    with job_log_capture(job_id=job.pk, attempt=1):
        done = threading.Thread(target=lambda: logging.getLogger("trawl.throttle").info("from the reactor thread"))
        done.start()
        done.join()

    assert [line.split(" ", 3)[3] for line in job_log_lines(job=job)] == ["from the reactor thread"]
