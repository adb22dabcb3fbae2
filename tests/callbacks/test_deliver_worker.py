"""The `deliver` task on a real worker: retries with backoff until the receiver answers, same event id throughout."""

from __future__ import annotations

import itertools
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from callbacks.models import Delivery
from callbacks.services import deliveries_sweep, event_emit
from callbacks.signing import signature_verify
from tests.callbacks.harness import FAST_ENV, Receiver, running_alone
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def callbacks_worker(django_db_setup, django_db_blocker, redis_server, tmp_path_factory):
    worker = Worker(queues="callbacks", concurrency=2, env=FAST_ENV, log_dir=tmp_path_factory.mktemp("callbacks"))
    with running_alone(worker):
        yield worker


def emit(requester, url, key):
    return event_emit(event="job.failed", dedupe_key=key, target_url=url, data={"id": key}, requester_id=requester.pk)


def wait_status(delivery, statuses, worker, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        delivery.refresh_from_db()
        if delivery.status in statuses:
            return delivery
        time.sleep(0.1)
    raise AssertionError(f"delivery still {delivery.status} after {timeout}s\n{worker.log_tail()}")


def test_500_three_times_then_200_is_delivered_on_the_4th_attempt_with_one_event_id(
    requester, callbacks_worker, settings
):
    settings.TRAWL_WEBHOOK_MAX_ATTEMPTS = 6
    with Receiver(script=[500, 500, 500]) as receiver:
        delivery = emit(requester, receiver.url, "job:retried")
        delivered = wait_status(delivery, ("delivered", "dead"), callbacks_worker)
        time.sleep(1)
        requests = receiver.events()

    assert (delivered.status, delivered.attempts, delivered.last_status_code) == ("delivered", 4, 200)
    assert [request.answered for request in requests] == [500, 500, 500, 200]
    assert {request.headers["X-Trawl-Delivery"] for request in requests} == {str(delivery.id)}
    assert {request.json["id"] for request in requests} == {str(delivery.id)}
    assert len({request.body for request in requests}) == 1, "every retry sends the same body"
    assert [request.headers["X-Trawl-Attempt"] for request in requests] == ["1", "2", "3", "4"]
    for request in requests:
        assert signature_verify(
            secret=requester.webhook_secret, body=request.body, header=request.headers["X-Trawl-Signature"]
        )
    log = list(delivered.attempt_log.values_list("number", "status_code", "ok"))
    assert log == [(1, 500, False), (2, 500, False), (3, 500, False), (4, 200, True)]
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(requests)]
    # Backoff base 0.4 s doubling, half-jittered: waits within [0.2, 0.4], [0.4, 0.8], [0.8, 1.6] (plus overhead).
    assert gaps[0] >= 0.15 and gaps[2] >= 0.7, gaps


def test_a_receiver_that_never_answers_2xx_ends_dead_after_the_maximum(requester, callbacks_worker, settings):
    settings.TRAWL_WEBHOOK_MAX_ATTEMPTS = 3
    with Receiver(default=500) as receiver:
        delivery = emit(requester, receiver.url, "job:dead")
        dead = wait_status(delivery, ("dead", "delivered"), callbacks_worker)
        time.sleep(1.5)
        requests = receiver.events()

    assert (dead.status, dead.attempts, dead.delivered_at) == ("dead", 3, None)
    assert len(requests) == 3
    assert list(dead.attempt_log.values_list("status_code", flat=True)) == [500, 500, 500]
    assert dead.last_error.startswith("HTTP 500")


def test_the_sweeper_delivers_an_event_whose_task_vanished(requester, callbacks_worker, settings, monkeypatch):
    settings.TRAWL_WEBHOOK_SWEEP_GRACE_SECONDS = 5
    with Receiver() as receiver:
        # Stored, but its task never reached the broker (say Redis was down at that moment).
        monkeypatch.setattr("project.messaging.messages.send", lambda work, **options: None)
        delivery = emit(requester, receiver.url, "job:vanished")
        monkeypatch.undo()
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=1))
        time.sleep(1)
        assert receiver.events() == []

        assert deliveries_sweep() == 1
        delivered = wait_status(delivery, ("delivered",), callbacks_worker)

    assert delivered.attempts == 1
    assert [request.headers["X-Trawl-Delivery"] for request in receiver.events()] == [str(delivery.id)]
