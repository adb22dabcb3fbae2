"""The admin's job page shows the job's log and alerts; a source's page charts its runs."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from crawls.logs.joblog import job_log_capture, job_log_forget, job_log_sink
from crawls.models import CrawlJob, JobStatus
from registry.models import Scraper
from sources.models import Source

pytestmark = pytest.mark.django_db


@pytest.fixture
def source(builtins):
    return Source.objects.create(url="http://shop.test/list", scraper=Scraper.objects.get(name="link"))


def test_job_page_shows_its_log_and_alerts(admin_client, source):
    job = CrawlJob.objects.create(
        url=source.url,
        scraper=source.scraper,
        source=source,
        status=JobStatus.SUCCEEDED,
        alerts=[{"monitor": "min_items", "expected": 100, "actual": 1}],
    )
    job_log_sink(job_id=job.pk, attempt=1).write(["2026-11-23T09:00:00.000Z INFO shop <b>parsed</b> 1 product"])
    try:
        page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()
    finally:
        job_log_forget(jobs=[(job.pk, 2)])

    assert "2026-11-23T09:00:00.000Z INFO shop &lt;b&gt;parsed&lt;/b&gt; 1 product" in page
    assert '<td><b style="color:#dc3545">min_items</b></td><td>100</td><td>1</td>' in page


def test_the_job_pages_log_box_shows_a_multi_line_record_on_its_own_lines(admin_client, source):
    job = CrawlJob.objects.create(url=source.url, scraper=source.scraper, status=JobStatus.FAILED)
    with job_log_capture(job_id=job.pk, attempt=1):
        try:
            raise KeyError("region")
        except KeyError:
            logging.getLogger("shop").exception("spider failed")
    try:
        page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()
        raw = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/log/").content.decode()
    finally:
        job_log_forget(jobs=[(job.pk, 2)])

    box = page.split('<pre style="max-height:30em')[1].split("</pre>")[0]
    assert "\\n" not in box and "\\n" not in raw
    assert re.search(r"\n\S+Z ERROR shop \| Traceback \(most recent call last\):\n", box), box
    assert re.search(r"\n\S+Z ERROR shop \| KeyError: &#x27;region&#x27;\n", box), box
    assert re.search(r"\n\S+Z ERROR shop \| KeyError: 'region'\n", raw), raw


def test_source_page_charts_its_runs(admin_client, source):
    now = timezone.now()
    for minutes, items in ((20, 7), (10, 3)):
        CrawlJob.objects.create(
            url=source.url,
            scraper=source.scraper,
            source=source,
            status=JobStatus.SUCCEEDED,
            stats={"items_new": items, "pages": 2},
            queued_at=now - timedelta(minutes=minutes),
        )

    page = admin_client.get(f"/admin/sources/source/{source.pk}/change/").content.decode()

    assert f'id="source-runs-{source.pk}"' in page
    assert "chart.umd.min.js" in page
    assert '"items_new": 7' in page and page.index('"items_new": 7') < page.index('"items_new": 3')


def test_the_job_page_shows_the_wall_clock_throttle_delay_apart_from_the_summed_waits(admin_client, source):
    stats = {"pages": 133, "throttle": {"waits": 1527, "wait_seconds_total": 65.5, "held_seconds": 4.2}}
    job = CrawlJob.objects.create(url=source.url, scraper=source.scraper, status=JobStatus.SUCCEEDED, stats=stats)

    page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()

    assert re.search(r"throttle delay</th><td[^>]*>4.2 s \(1527 waits\)</td>", page), page
    assert re.search(r"… summed over requests</th><td[^>]*>65.5 s</td>", page), page
