"""One delivery attempt at a time, in this process, against a local receiver: outcomes, log, retries, dead."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from callbacks.models import Delivery, DeliveryStatus
from callbacks.publish import DELIVER
from callbacks.services import backoff_seconds, deliveries_sweep, delivery_attempt, delivery_redeliver, event_emit
from callbacks.signing import signature_verify
from tests.callbacks.harness import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(sent_tasks):
    """Publishing a delivery task is recorded instead of sent: these tests make the attempts themselves."""
    return sent_tasks


@pytest.fixture
def receiver():
    with Receiver() as local:
        yield local


def emit(requester, url, *, key="batch:1", max_attempts=None, settings=None):
    if max_attempts is not None:
        settings.TRAWL_WEBHOOK_MAX_ATTEMPTS = max_attempts
    return event_emit(
        event="batch.completed", dedupe_key=key, target_url=url, data={"total": 0}, requester_id=requester.pk
    )


def test_backoff_doubles_from_the_base_up_to_the_cap_with_half_jitter():
    low, high = (lambda a, b: a), (lambda a, b: b)

    assert [backoff_seconds(n, base=10, cap=1000, rng=high) for n in (1, 2, 3, 4)] == [10, 20, 40, 80]
    assert [backoff_seconds(n, base=10, cap=1000, rng=low) for n in (1, 2, 3, 4)] == [5, 10, 20, 40]
    assert backoff_seconds(20, base=10, cap=1000, rng=high) == 1000
    assert 5 <= backoff_seconds(1, base=10, cap=1000) <= 10


def test_a_2xx_delivers_a_signed_post_and_logs_the_attempt(requester, receiver, published):
    delivery = emit(requester, receiver.url)

    outcome = delivery_attempt(delivery_id=delivery.id)

    assert outcome.status == "delivered"
    [request] = receiver.events()
    assert request.headers["X-Trawl-Event"] == "batch.completed"
    assert request.headers["X-Trawl-Delivery"] == str(delivery.id) == request.json["id"]
    assert signature_verify(
        secret=requester.webhook_secret, body=request.body, header=request.headers["X-Trawl-Signature"]
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    assert delivery.delivered_at is not None
    [attempt] = delivery.attempt_log.all()
    assert (attempt.number, attempt.status_code, attempt.ok, attempt.error) == (1, 200, True, "")
    assert attempt.duration_ms >= 0


def test_a_500_is_retried_later_with_backoff(requester, receiver, published, settings):
    settings.TRAWL_WEBHOOK_BACKOFF_SECONDS = 30
    receiver.script = [500]
    delivery = emit(requester, receiver.url)

    outcome = delivery_attempt(delivery_id=delivery.id)

    assert outcome.status == "failed"
    assert 15 <= outcome.retry_in <= 30
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 1, 500)
    assert delivery.last_error.startswith("HTTP 500")
    assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=14)
    # A duplicate message arriving before the retry is due sends nothing.
    assert delivery_attempt(delivery_id=delivery.id).status == "skipped"
    assert len(receiver.events()) == 1


def test_after_the_last_attempt_the_delivery_is_dead(requester, receiver, published, settings):
    receiver.default = 503
    delivery = emit(requester, receiver.url, max_attempts=2, settings=settings)

    first = delivery_attempt(delivery_id=delivery.id)
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    second = delivery_attempt(delivery_id=delivery.id)

    assert (first.status, second.status, second.retry_in) == ("failed", "dead", None)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("dead", 2)
    assert [a.status_code for a in delivery.attempt_log.all()] == [503, 503]
    assert delivery_attempt(delivery_id=delivery.id).status == "skipped"


def test_network_errors_and_redirects_are_failed_attempts(requester, published):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    refused = emit(requester, f"http://127.0.0.1:{closed_port}/hook", key="job:1")

    delivery_attempt(delivery_id=refused.id)

    refused.refresh_from_db()
    assert (refused.status, refused.last_status_code) == ("failed", None)
    assert "refused" in refused.last_error.lower()
    with Receiver(script=[302]) as redirecting:
        moved = emit(requester, redirecting.url, key="job:2")
        delivery_attempt(delivery_id=moved.id)
    moved.refresh_from_db()
    assert (moved.status, moved.last_status_code) == ("failed", 302)


def test_an_attempt_in_flight_is_not_made_twice(requester, receiver, published):
    delivery = emit(requester, receiver.url)
    # Another worker claimed attempt 1 a moment ago (attempts went 0 -> 1, leased into the future).
    Delivery.objects.filter(pk=delivery.pk).update(attempts=1, next_attempt_at=timezone.now() + timedelta(minutes=1))

    assert delivery_attempt(delivery_id=delivery.id).status == "skipped"
    assert receiver.events() == []


def test_deliver_again_keeps_the_event_id_and_grants_fresh_attempts(requester, receiver, published, settings):
    receiver.default = 500
    delivery = emit(requester, receiver.url, max_attempts=1, settings=settings)
    delivery_attempt(delivery_id=delivery.id)
    delivery.refresh_from_db()
    assert delivery.status == "dead"

    receiver.default = 200
    delivery_redeliver(delivery=delivery)
    assert delivery_attempt(delivery_id=delivery.id).status == "delivered"

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    assert {request.headers["X-Trawl-Delivery"] for request in receiver.events()} == {str(delivery.id)}


def test_sweeper_republishes_only_deliveries_overdue_past_the_grace(requester, published, settings):
    settings.TRAWL_WEBHOOK_SWEEP_GRACE_SECONDS = 60
    now = timezone.now()
    lost = emit(requester, "http://hooks.test/a", key="job:lost")
    due_now = emit(requester, "http://hooks.test/b", key="job:due")
    done = emit(requester, "http://hooks.test/c", key="job:done")
    Delivery.objects.filter(pk=lost.pk).update(next_attempt_at=now - timedelta(minutes=5), status="failed")
    Delivery.objects.filter(pk=due_now.pk).update(next_attempt_at=now - timedelta(seconds=5))
    Delivery.objects.filter(pk=done.pk).update(next_attempt_at=now - timedelta(minutes=5), status="delivered")

    assert deliveries_sweep() == 1
    assert published.args_of(DELIVER) == [(str(lost.pk),)]
    assert Delivery.objects.get(pk=done.pk).status == DeliveryStatus.DELIVERED
