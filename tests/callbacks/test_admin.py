"""The admin: batches with a progress bar, their jobs and a cancel action; deliveries with their log and a
"deliver again" action."""

from __future__ import annotations

import pytest
from django.utils import timezone

from callbacks.models import Delivery, DeliveryAttempt
from callbacks.services import event_emit
from crawls.models import CrawlJob
from crawls.services.batches import batch_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def quiet(sent_tasks):
    return sent_tasks


@pytest.fixture
def batch(requester, builtins, quiet):
    batch = batch_create(requester=requester, name="nightly", jobs=[{"url": f"http://shop.test/{n}"} for n in range(4)])
    first, second, *_ = batch.jobs.order_by("queued_at")
    CrawlJob.objects.filter(pk=first.pk).update(status="succeeded", finished_at=timezone.now())
    CrawlJob.objects.filter(pk=second.pk).update(status="failed", error_class="dns", finished_at=timezone.now())
    return batch


def test_batch_list_shows_progress_and_the_page_lists_its_jobs(admin_client, batch):
    listing = admin_client.get("/admin/crawls/batch/")
    page = admin_client.get(f"/admin/crawls/batch/{batch.pk}/change/")

    assert listing.status_code == 200
    assert "2/4" in listing.content.decode()
    assert "background:#198754" in listing.content.decode()  # the succeeded segment of the bar
    assert page.status_code == 200
    assert page.content.decode().count("http://shop.test/") >= 4


def test_cancel_action_cancels_the_batch(admin_client, batch):
    response = admin_client.post(
        "/admin/crawls/batch/", {"action": "cancel", "_selected_action": [str(batch.pk)]}, follow=True
    )

    assert response.status_code == 200
    batch.refresh_from_db()
    assert batch.status == "cancelled"
    assert set(batch.jobs.values_list("status", flat=True)) == {"succeeded", "failed", "cancelled"}


def test_delivery_page_shows_the_attempt_log_and_deliver_again_requeues(admin_client, requester, quiet, settings):
    delivery = event_emit(
        event="job.failed", dedupe_key="job:x", target_url="http://hooks.test/", data={}, requester_id=requester.pk
    )
    DeliveryAttempt.objects.create(
        delivery=delivery, number=1, started_at=timezone.now(), duration_ms=12, status_code=500, error="HTTP 500: no"
    )
    Delivery.objects.filter(pk=delivery.pk).update(status="dead", attempts=1, max_attempts=1)

    page = admin_client.get(f"/admin/callbacks/delivery/{delivery.pk}/change/")
    response = admin_client.post(
        "/admin/callbacks/delivery/", {"action": "deliver_again", "_selected_action": [str(delivery.pk)]}, follow=True
    )

    assert page.status_code == 200
    assert "HTTP 500: no" in page.content.decode()
    assert response.status_code == 200
    delivery.refresh_from_db()
    assert (delivery.status, delivery.max_attempts) == ("pending", 1 + settings.TRAWL_WEBHOOK_MAX_ATTEMPTS)
