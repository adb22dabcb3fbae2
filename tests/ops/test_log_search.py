"""`?q=TEXT` on a job's log: the records containing TEXT, case aside, a multi-line record as one (API and admin)."""

from __future__ import annotations

import logging

import pytest

from crawls.logs.joblog import job_log_capture, job_log_forget
from crawls.models import CrawlJob, JobStatus
from registry.models import Scraper

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(requester, builtins):
    job = CrawlJob.objects.create(
        url="http://shop.test/", scraper=Scraper.objects.get(name="link"), requester=requester, status=JobStatus.RUNNING
    )
    with job_log_capture(job_id=job.pk, attempt=1):
        logging.getLogger("scrapy.core.engine").info("Spider opened")
        for page in (1, 2, 3):
            try:
                raise NameError(f"name 'price_{page}' is not defined")
            except NameError:
                logging.getLogger("shop").exception("Spider error processing page %s", page)
        logging.getLogger("shop").info("done, nameerror-free")
    yield job
    job_log_forget(jobs=[(job.pk, 2)])


def records(text: str) -> list[str]:
    return [line for line in text.splitlines() if " | " not in line]


def test_q_keeps_the_records_containing_the_text_whatever_its_case_with_their_lines(api, job):
    text = api.get(f"/api/jobs/{job.pk}/log/", {"q": "NAMEERROR: NAME 'PRICE_2'"}).content.decode()

    assert [line.split(" ", 3)[3] for line in records(text)] == ["Spider error processing page 2"]
    assert text.splitlines()[1].endswith("| Traceback (most recent call last):")
    assert text.splitlines()[-1].endswith("| NameError: name 'price_2' is not defined")


def test_q_combines_with_tail_and_level(api, job):
    url = f"/api/jobs/{job.pk}/log/"

    assert len(records(api.get(url, {"q": "nameerror"}).content.decode())) == 4
    assert len(records(api.get(url, {"q": "nameerror", "level": "ERROR"}).content.decode())) == 3
    tail = records(api.get(url, {"q": "nameerror", "level": "ERROR", "tail": 1}).content.decode())
    assert [line.split(" ", 3)[3] for line in tail] == ["Spider error processing page 3"]
    assert api.get(url, {"q": "no such text"}).content == b""


def test_a_too_long_q_is_a_400_naming_it(api, job):
    response = api.get(f"/api/jobs/{job.pk}/log/", {"q": "x" * 201})

    assert response.status_code == 400
    assert "q" in response.json()


def test_the_admins_log_view_searches_the_same_way_and_the_job_page_has_the_box(admin_client, job):
    page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()
    found = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/log/", {"q": "PRICE_1", "tail": 5}).content.decode()

    assert 'class="trawl-log-search"' in page and 'name="q"' in page
    assert [line.split(" ", 3)[3] for line in records(found)] == ["Spider error processing page 1"]
    assert admin_client.get(f"/admin/crawls/crawljob/{job.pk}/log/", {"tail": "x"}).status_code == 400
