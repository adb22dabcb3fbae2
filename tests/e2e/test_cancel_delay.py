"""A cancel stops an in-process crawl with DOWNLOAD_DELAY at once, not after the requests waiting for their delay.

Scrapy's graceful stop still sends what waits in a downloader slot's queue, one delay apart (runtime.bridge.stopping).
Measured here (DOWNLOAD_DELAY = 2, no jitter, the `link` spider on a binary tree of pages, cancelled after 4 pages),
from the cancel to the job's `cancelled`: before the fix the site saw the 5 queued requests, one every 2 s, and the
job ended 10.0 s after the cancel; after it, 0 requests and 0.4 s. (A packaged child stops the same way:
tests/e2e/test_scrapyd.py.)
"""

from __future__ import annotations

import time

import pytest

from crawls.models import CrawlJob
from registry.models import Scraper, ScraperVersion
from tests.e2e.test_first_hour import finished, localhost_rule, slow_beat_worker, stamped_site, submit  # noqa: F401
from tests.e2e.test_throttle_e2e import wait_for_hits

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
DELAY = 2


def test_a_cancel_drops_the_requests_waiting_for_their_download_delay(
    api,
    builtins,
    stamped_site,  # noqa: F811
    localhost_rule,  # noqa: F811
    slow_beat_worker,  # noqa: F811
):
    localhost_rule(rate=50, burst=50, ip_rate=50, ip_burst=50)  # the download delay alone paces this crawl
    scraper = Scraper.objects.create(name="delayed")
    settings = {"DOWNLOAD_DELAY": DELAY, "DOWNLOAD_DELAY_JITTER": 0}
    ScraperVersion.objects.create(
        scraper=scraper, version="1.0.0", spider="runtime.spiders.link.LinkSpider", settings=settings, is_default=True
    )
    job_id = submit(api, url=f"{stamped_site.url}/a/0", scraper="delayed", options={"maxdepth": 8})
    try:
        wait_for_hits(stamped_site, 5)  # robots.txt and 4 pages: each page linked two more, queued behind the delay
    except AssertionError as exc:
        status = CrawlJob.objects.get(pk=job_id).status
        raise AssertionError(f"{exc}: job {status}\n{slow_beat_worker.log_tail()}") from None

    cancel_at = time.time()  # the site's own clock: its request log is what we count against
    response = api.post(f"/api/jobs/{job_id}/cancel/")
    job = finished(job_id, slow_beat_worker)

    assert response.status_code == 202, response.content
    assert (job.status, job.error_class) == ("cancelled", "cancelled"), job.error_message
    late = stamped_site.times(since=cancel_at)
    took = (job.finished_at - job.cancel_requested_at).total_seconds()
    # The slot lets one request go every DELAY seconds and the crawl reads the cancel flag every tick (under a
    # second): at most the one it let go before it saw the flag reaches the site, never the ones still queued.
    assert len(late) <= 1, f"the site saw {len(late)} requests after the cancel; the job ended {took:.1f} s after it"
    warnings = api.get(f"/api/jobs/{job_id}/log/", {"level": "WARNING"}).content.decode()
    assert not warnings.strip(), warnings  # the dropped requests are neither errors nor retried
