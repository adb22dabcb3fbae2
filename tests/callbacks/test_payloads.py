"""Webhook bodies match the contract: envelope, job data with the error class, batch totals with every job."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from callbacks.models import Delivery
from callbacks.payloads import body_bytes
from crawls.models import Batch, CrawlJob
from crawls.webhooks import batch_data, batch_event_emit, job_data, job_event_emit, job_event_type
from registry.models import Scraper, ScraperVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def link(builtins):
    return Scraper.objects.get(name="link")


def make_job(link, requester, *, status, error_class="", message="", batch=None, **extra):
    now = timezone.now()
    return CrawlJob.objects.create(
        url="http://shop.test/p/1",
        scraper=link,
        version=ScraperVersion.objects.get(scraper=link),
        requester=requester,
        status=status,
        error_class=error_class,
        error_message=message,
        started_at=now,
        finished_at=now,
        stats={"pages": 1, "items": 1},
        callback_url="http://hooks.test/job",
        batch=batch,
        **extra,
    )


def test_job_completed_payload_carries_the_job(link, requester, settings):
    settings.TRAWL_WEBHOOK_LINK_BASE_URL = "https://trawl.example/"
    job = make_job(link, requester, status="succeeded")

    delivery = job_event_emit(job=job)

    payload = delivery.payload
    assert (payload["id"], payload["event"]) == (str(delivery.id), "job.completed")
    assert payload["created_at"]
    data = payload["data"]
    assert data["id"] == str(job.id)
    assert (data["url"], data["status"], data["error_class"], data["error"]) == (job.url, "succeeded", "", "")
    assert data["stats"] == {"pages": 1, "items": 1}
    assert data["items_url"] == f"https://trawl.example/api/jobs/{job.id}/items/"
    assert data["log_url"] == f"https://trawl.example/api/jobs/{job.id}/log/"
    assert (data["scraper"], data["version"], data["batch_id"]) == ("link", "1.0.0", None)
    assert (delivery.target_url, delivery.requester, delivery.event) == (
        "http://hooks.test/job",
        requester,
        "job.completed",
    )


@pytest.mark.parametrize(
    ("status", "error_class"), [("failed", "dns"), ("dead", "worker_lost"), ("cancelled", "cancelled")]
)
def test_every_other_final_state_is_job_failed_with_its_error_class(link, requester, status, error_class):
    job = make_job(link, requester, status=status, error_class=error_class, message="boom")

    data = job_data(job)

    assert job_event_type(job) == "job.failed"
    assert (data["status"], data["error_class"], data["error"]) == (status, error_class, "boom")


def test_batch_completed_payload_has_totals_and_every_job(link, requester):
    batch = Batch.objects.create(requester=requester, name="nightly", total=3, callback_url="http://hooks.test/b")
    jobs = [
        make_job(link, requester, status="succeeded", batch=batch),
        make_job(link, requester, status="failed", error_class="http_4xx", batch=batch),
        make_job(link, requester, status="failed", error_class="dns", batch=batch),
    ]
    batch.status, batch.finished_at = "completed", timezone.now()
    batch.totals = {"succeeded": 1, "failed": 2, "cancelled": 0, "dead": 0}
    batch.save()

    data = batch_data(batch)

    assert (data["id"], data["name"], data["status"], data["total"]) == (str(batch.id), "nightly", "completed", 3)
    assert data["totals"] == {"succeeded": 1, "failed": 2, "cancelled": 0, "dead": 0}
    assert {row["id"]: (row["status"], row["error_class"]) for row in data["jobs"]} == {
        str(job.id): (job.status, job.error_class) for job in jobs
    }


def test_an_event_is_emitted_once_per_subject(link, requester):
    batch = Batch.objects.create(requester=requester, total=0, callback_url="http://hooks.test/b")

    first = batch_event_emit(batch=batch)
    second = batch_event_emit(batch=batch)

    assert first is not None and second is None
    assert Delivery.objects.filter(batch=batch).count() == 1


def test_body_is_compact_sorted_json_so_retries_send_identical_bytes():
    payload = {"b": 1, "a": {"d": [1, 2], "c": "é"}}

    body = body_bytes(payload)

    assert body == '{"a":{"c":"é","d":[1,2]},"b":1}'.encode()
    assert json.loads(body) == payload
