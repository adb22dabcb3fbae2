"""Faults with real processes: a webhook receiver down for a while gets its event later, exactly once."""

from __future__ import annotations

import socket
import threading
import time
from http.server import ThreadingHTTPServer

import pytest

from tests.callbacks.harness import FAST_ENV, Receiver, running_alone
from tests.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def callbacks_worker(django_db_setup, django_db_blocker, redis_server, tmp_path):
    worker = Worker(queues="callbacks", concurrency=1, env=FAST_ENV, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def receiver_on(port: int) -> Receiver:
    """A Receiver on a given port (the one the delivery has been failing to reach)."""
    receiver = Receiver()
    handler = receiver.server.RequestHandlerClass
    receiver.server.server_close()
    receiver.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    receiver.server.daemon_threads = True
    receiver.thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    return receiver


def test_a_webhook_receiver_down_for_a_while_gets_the_event_later_exactly_once(requester, callbacks_worker, settings):
    from callbacks.models import Delivery
    from callbacks.services import UNFINISHED, event_emit

    settings.TRAWL_WEBHOOK_MAX_ATTEMPTS = 8
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    delivery = event_emit(
        event="job.failed",
        dedupe_key="job:receiver-down",
        target_url=f"http://127.0.0.1:{port}/hook",
        data={"id": "x"},
        requester_id=requester.pk,
    )
    # Count attempts whose refusal is recorded, not claimed ones: a claimed attempt may still be connecting, and
    # would then reach the receiver started below.
    refused = delivery.attempt_log.filter(ok=False).exclude(error=UNFINISHED)
    deadline = time.monotonic() + 30
    while refused.count() < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    refused_before = refused.count()
    status = Delivery.objects.get(pk=delivery.pk).status
    assert refused_before >= 3 and status not in ("delivered", "dead"), callbacks_worker.log_tail()

    with receiver_on(port) as receiver:
        receiver.wait_for(lambda r: r.events("job.failed"), timeout=30, why="the late delivery")
        time.sleep(3)  # any duplicate would arrive now
        received = receiver.events()
    # The worker records the delivery after the receiver's answer: poll for it rather than read once.
    deadline = time.monotonic() + 30
    delivery.refresh_from_db()
    while delivery.status != "delivered" and time.monotonic() < deadline:
        time.sleep(0.2)
        delivery.refresh_from_db()

    assert delivery.status == "delivered" and delivery.attempts > refused_before
    assert len(received) == 1
    assert received[0].headers["X-Trawl-Delivery"] == str(delivery.pk)
    log = list(delivery.attempt_log.order_by("number").values_list("ok", flat=True))
    assert log[-1] is True and not any(log[:-1])
