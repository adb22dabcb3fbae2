"""A delivery's attempts are bounded in time and in number (issue 41): a receiver dripping one byte every second
(never idle long enough for a per-read timeout) is cut at the POST's deadline, over http and https alike; an attempt
cut by Celery's soft time limit is still recorded; and no attempt is claimed past `max_attempts`."""

from __future__ import annotations

import signal
import ssl
import time
from http.server import BaseHTTPRequestHandler

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from callbacks.models import Delivery, DeliveryAttempt, DeliveryStatus
from callbacks.services import delivery_attempt, event_emit
from callbacks.transport import post_signed
from tests.callbacks.test_transport_tls import hook_name  # noqa: F401 (fixture)
from tests.security.nameserver import self_signed
from tests.sites import ServedSite

pytestmark = pytest.mark.django_db


class DripReceiver(ServedSite):
    """Answers a POST one byte a second, forever; an https one with `tls` (certificate, key)."""

    def __init__(self, *, host: str = "127.0.0.1", tls: tuple[str, str] | None = None) -> None:
        self.posts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts += 1
                try:
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"o" * 100:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(1)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        super().__init__(Handler, host=host, path="/drip")
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)


def test_a_dripping_receiver_is_cut_at_the_deadline():
    with DripReceiver() as drip:
        result = post_signed(url=drip.url, payload={}, headers={}, secret="s", timeout=10, deadline=2)

    assert not result.ok and result.error == "deadline: no complete answer within 2s"
    assert result.duration_ms < 10_000, "cut by the deadline, not by the per-read timeout"


def test_a_dripping_https_receiver_is_cut_at_the_deadline(hook_name, tmp_path, monkeypatch):  # noqa: F811
    cert, key = self_signed(tmp_path, "hook.test")
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    with DripReceiver(host="127.0.0.2", tls=(cert, key)) as drip:
        url = f"https://hook.test:{drip.port}/drip"
        result = post_signed(url=url, payload={}, headers={}, secret="s", timeout=10, deadline=2)

    assert drip.posts == 1, "the POST reached the receiver over TLS"
    assert not result.ok and result.error.startswith("deadline"), result.error


def test_an_attempt_cut_by_the_soft_time_limit_is_recorded_and_retried(requester, settings, sent_tasks):
    settings.TRAWL_WEBHOOK_DEADLINE_SECONDS = 30
    with DripReceiver() as drip:
        delivery = event_emit(
            event="job.failed", dedupe_key="job:soft", target_url=drip.url, data={}, requester_id=requester.pk
        )

        def soft_limit(*_args):  # what billiard's handler does in a pool process when the soft limit passes
            raise SoftTimeLimitExceeded()

        previous = signal.signal(signal.SIGALRM, soft_limit)
        signal.setitimer(signal.ITIMER_REAL, 3)  # after the claim and the POST, even on a loaded machine
        try:
            outcome = delivery_attempt(delivery_id=delivery.pk)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    delivery.refresh_from_db()
    [attempt] = DeliveryAttempt.objects.filter(delivery=delivery)
    assert drip.posts == 1
    assert outcome.status == "failed" and outcome.retry_in is not None
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 1
    assert attempt.error.startswith("SoftTimeLimitExceeded") and not attempt.ok


def test_no_attempt_is_claimed_past_max_attempts(requester, settings, sent_tasks):
    settings.TRAWL_WEBHOOK_MAX_ATTEMPTS = 2
    with DripReceiver() as drip:
        delivery = event_emit(
            event="job.failed", dedupe_key="job:spent", target_url=drip.url, data={}, requester_id=requester.pk
        )
        # Both attempts were claimed, the last one's worker died before recording it: still `failed`, and due.
        Delivery.objects.filter(pk=delivery.pk).update(attempts=2, status=DeliveryStatus.FAILED)

        outcome = delivery_attempt(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert outcome.status == "dead" and delivery.status == DeliveryStatus.DEAD
    assert drip.posts == 0 and delivery.attempts == 2
