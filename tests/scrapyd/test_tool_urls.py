"""The `log_url` and `items_url` listjobs.json answers take the basic credentials scrapyd's tools already hold (a
requester's name and its API token), over real HTTP; another requester's credentials find nothing there."""

from __future__ import annotations

import pytest
import requests
from django.utils import timezone

from access.services import token_issue
from access.tenancy import job_tenant_id
from crawls.models import CrawlJob, JobLog, JobStatus
from items.services import items_upsert
from registry.models import Scraper

pytestmark = pytest.mark.django_db(transaction=True)
LOG = "2026-11-29T07:00:00.000Z INFO scrapy.core.engine Spider opened\n"


@pytest.fixture
def finished_job(builtins):
    alice, alice_token = token_issue(requester_name="alice")
    now = timezone.now()
    job = CrawlJob.objects.create(
        url="http://shop.test/", scraper=Scraper.objects.get(name="link"), requester=alice,
        status=JobStatus.SUCCEEDED, started_at=now, finished_at=now,
    )  # fmt: skip
    JobLog.objects.create(job=job, attempt=job.attempt, text=LOG.strip())
    tenant = job_tenant_id(requester_id=alice.pk)
    items_upsert(job_id=job.pk, scraper_id=job.scraper_id, tenant_id=tenant, items=[{"url": "http://shop.test/p1"}])
    return job, ("alice", alice_token)


def test_log_and_items_urls_take_scrapyd_basic_credentials_and_keep_tenancy(live_server, finished_job):
    job, alice = finished_job
    jobs = requests.get(f"{live_server.url}/scrapyd/listjobs.json", auth=alice, timeout=30).json()
    shape = jobs["finished"][0]
    assert shape["id"] == str(job.pk)

    log = requests.get(shape["log_url"], auth=alice, timeout=30)
    assert log.status_code == 200 and log.text == LOG, log.text
    items = requests.get(shape["items_url"], auth=alice, timeout=30)
    assert items.status_code == 200 and items.json()["results"][0]["data"] == {"url": "http://shop.test/p1"}
    jsonl = requests.get(shape["items_url"], params={"format": "jsonl"}, auth=alice, timeout=30)
    assert jsonl.status_code == 200 and "http://shop.test/p1" in jsonl.text

    _, bob_token = token_issue(requester_name="bob")
    for url in (shape["log_url"], shape["items_url"]):
        assert requests.get(url, auth=("bob", bob_token), timeout=30).status_code == 404  # not bob's job
        refused = requests.get(url, auth=("alice", bob_token), timeout=30)  # bob's token under alice's name
        assert refused.status_code == 401 and "alice" not in refused.text
        assert requests.get(url, auth=("alice", "not-a-token"), timeout=30).status_code == 401
    # Only those two take basic credentials: the rest of the API stays Token-only.
    other = requests.get(f"{live_server.url}/api/jobs/{job.pk}/", auth=alice, timeout=30)
    assert other.status_code == 401
