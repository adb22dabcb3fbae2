"""A rendered crawl stopped by its job TIMEOUT, and one stopped by the STALL watchdog, leave no Chromium process:
the worker's descendants are read from the process table while the crawl renders and after it ended, as for cancel
and SIGKILL (tests/e2e/test_render_e2e.py). Real `celery worker` processes, Debian's Chromium, local sites."""

from __future__ import annotations

import pytest

from crawls.models import CrawlJob
from registry.models import ScraperVersion
from tests.callbacks.harness import running_alone
from tests.conftest import wait_for_job
from tests.e2e.frontier_stack import TreeSite
from tests.e2e.test_render_e2e import browser_processes, wait_gone, watch_browser
from tests.ops.site import TroubleSite
from tests.security.hostile_site import submit
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The stall worker's TRAWL_STALL_SECONDS (the default is 600). Its clock runs from the crawl's start, Chromium's
# launch included: at 3 s a loaded machine stopped the crawl before it asked for /hang (a CI run).
STALL_SECONDS = 10


def test_a_rendered_crawl_stopped_by_its_timeout_leaves_no_chromium_process(api, builtins, crawl_worker, job_waiter):
    link = ScraperVersion.objects.get(scraper__name="link")
    # The job's clock includes Chromium's launch: at 4 s a loaded machine timed the crawl out before its third page
    # (a full run). 400 pages 0.2 s each, rendered, outlast 10 s anywhere.
    link.settings = {"TRAWL_JOB_TIMEOUT": 10}
    link.save()
    site = TreeSite(pages=400, delay=0.2)
    try:
        job_id = submit(api, url=f"{site.url}/p/0", options={"maxdepth": 20, "render": True})
        seen = watch_browser(crawl_worker.process.pid, lambda: sum(site.page_hits().values()) >= 1)
        job = job_waiter(job_id)
        wait_gone(seen, why="Chromium outlived its timed-out crawl")
    finally:
        site.server.shutdown()

    assert (job.status, job.error_class) == ("failed", "timeout"), job.error_message
    assert job.stats["render"]["pages"] >= 1
    wait_gone(browser_processes(crawl_worker.process.pid), why="Chromium processes started after the last look")
    print(f"timeout: {len(seen)} Chromium processes, all gone")


@pytest.fixture
def stall_worker(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """A worker with a short stall limit, the only one consuming while the test runs."""
    worker = Worker(env={"TRAWL_STALL_SECONDS": str(STALL_SECONDS)}, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def test_a_rendered_crawl_stopped_by_the_stall_watchdog_leaves_no_chromium_process(api, builtins, stall_worker):
    """`/stalls` renders; the page it links to never answers (its connection stays open): Chromium waits on it, the
    watchdog stops the crawl after STALL_SECONDS, and Chromium closes with it."""
    link = ScraperVersion.objects.get(scraper__name="link")
    # Timeouts well above STALL_SECONDS: the watchdog, not a timeout, must be what stops the crawl.
    link.settings = {"DOWNLOAD_TIMEOUT": 60, "RETRY_TIMES": 0, "TRAWL_RENDER_TIMEOUT": 30}
    link.save()
    with TroubleSite() as trouble:
        job_id = submit(api, url=f"{trouble.url}/stalls", options={"maxdepth": 1, "render": True})
        seen = watch_browser(stall_worker.process.pid, lambda: trouble.hits["hang"] >= 1)
        try:
            job = wait_for_job(job_id, timeout=120)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- worker log ---\n{stall_worker.log_tail()}") from None
        wait_gone(seen, why="Chromium outlived its stalled crawl")
        hang_hits = trouble.hits["hang"]

    assert (job.status, job.error_class) == ("failed", "stalled"), (job.error_message, job.stats)
    assert hang_hits == 1 and job.stats["render"]["pages"] == 1
    wait_gone(browser_processes(stall_worker.process.pid), why="Chromium processes started after the last look")
    assert CrawlJob.objects.get(pk=job_id).finished_at is not None
    print(f"stall: {len(seen)} Chromium processes, all gone")
