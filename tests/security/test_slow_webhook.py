"""A slow webhook receiver must not hold Trawl's workers (issue 41). An ordinary requester points four jobs' callbacks
at a receiver that answers one byte every two seconds; another requester's job and batch must still get their
events promptly, each slow delivery must be a recorded failed attempt, and none is sent past `max_attempts`, even
with the sweeper running.

End to end with `make run`'s process layout, read from the Procfile: a crawl worker, the ops worker on its queues and
the webhook worker (`hooks`) on its own (two processes here, fewer than the four slow receivers), and a real beat
running the delivery sweeper every two seconds. Before the fix a dripping receiver held a process until the soft
time limit (690 s), the attempt was never recorded, and the sweeper sent it again without end.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from callbacks.models import Delivery, DeliveryAttempt
from tests.callbacks.harness import FAST_ENV, Beat, Receiver, exclusive, sweepers_every
from tests.clients import client_for
from tests.sites import ServedSite
from tests.workers import BASE_DIR, Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SLOW_JOBS = 4
MAX_ATTEMPTS = 2
DEADLINE = 4  # seconds per POST
DRIP_SECONDS = 2.0  # one byte this often: never idle long enough for the 10 s per-read timeout
ENV = {
    **FAST_ENV,
    "TRAWL_WEBHOOK_DEADLINE_SECONDS": str(DEADLINE),
    "TRAWL_WEBHOOK_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
    "TRAWL_WEBHOOK_SWEEP_GRACE_SECONDS": "2",
}
# Generous, well under the 690 s a dripping receiver used to hold a process for; polled, not waited out.
PROMPT = 150


class DripReceiver(ServedSite):
    """Reads a POST, then answers one byte every DRIP_SECONDS (a whole answer would take minutes). Records the
    delivery id and attempt number of every POST."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.posts.append((self.headers["X-Trawl-Delivery"], self.headers["X-Trawl-Attempt"]))
                answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 40\r\n\r\n" + b"o" * 40
                try:
                    for byte in answer:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(DRIP_SECONDS)
                except OSError:
                    pass  # Trawl hung up: what the deadline is for

            def log_message(self, *args):
                pass

        super().__init__(Handler, path="/slow")

    def counts(self) -> Counter:
        with self.lock:
            return Counter(delivery for delivery, _ in self.posts)

    def attempts_sent(self) -> set[str]:
        with self.lock:
            return {attempt for _, attempt in self.posts}


def procfile_queues(name: str) -> str | None:
    """The queues (`-Q`) of a Procfile process, None if the Procfile has no such process."""
    for line in Path(BASE_DIR, "Procfile").read_text().splitlines():
        key, _, command = line.partition(":")
        if key.strip() == name:
            args = shlex.split(command)
            return args[args.index("-Q") + 1]
    return None


@pytest.fixture
def layout(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """`make run`'s workers (crawl, ops, and hooks when the Procfile has it), the only consumers while the test runs,
    and a beat running the delivery sweeper every two seconds."""
    crawl = Worker(queues=procfile_queues("worker"), concurrency=1, env=ENV, log_dir=tmp_path)
    ops = Worker(queues=procfile_queues("ops"), concurrency=1, env=ENV, log_dir=tmp_path)
    workers = {"crawl": crawl, "ops": ops}
    if hooks_queues := procfile_queues("hooks"):
        workers["hooks"] = Worker(queues=hooks_queues, concurrency=2, env=ENV, log_dir=tmp_path)
    sweepers_every(2)
    beat = Beat(log_dir=tmp_path, env=ENV)
    try:
        for worker in workers.values():
            worker.start(timeout=120)
        beat.start()
        with exclusive(*workers.values()):
            yield workers, beat
    finally:
        beat.stop()
        for worker in workers.values():
            worker.stop()


def wait_until(predicate, *, timeout: float, what: str, report) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout}s\n{report()}")
        time.sleep(0.3)


def test_slow_receivers_hold_no_worker_and_are_never_sent_past_max_attempts(builtins, layout):
    workers, beat = layout

    def report() -> str:
        rows = list(Delivery.objects.values_list("target_url", "status", "attempts", "last_error"))
        logs = "\n".join(f"--- {name} ---\n{worker.log_tail(40)}" for name, worker in workers.items())
        return f"deliveries: {rows}\n{logs}\n--- beat ---\n{beat.log_tail(10)}"

    page = {"/": (200, "<html><title>one page</title><body>hello</body></html>")}
    with ServedSite(page) as site, DripReceiver() as drip, Receiver() as prompt:
        dripper, bystander = client_for("dripper"), client_for("bystander")
        for _ in range(SLOW_JOBS):
            body = {"url": f"{site.url}/", "callback_url": drip.url, "options": {"maxdepth": 0}}
            assert dripper.post("/api/jobs/", body, format="json").status_code == 201
        # The bystander comes once slow POSTs hold every webhook process: its events queue behind them.
        wait_until(lambda: len(drip.counts()) >= 2, timeout=PROMPT, what="two slow POSTs at once", report=report)
        started = time.monotonic()
        job = bystander.post(
            "/api/jobs/", {"url": f"{site.url}/", "callback_url": prompt.url, "options": {"maxdepth": 0}}
        )
        batch = bystander.post(
            "/api/batches/", {"callback_url": prompt.url, "jobs": [{"url": f"{site.url}/", "options": {"maxdepth": 0}}]}
        )
        assert (job.status_code, batch.status_code) == (201, 201), (job.content, batch.content)

        wait_until(
            lambda: prompt.events("job.completed") and prompt.events("batch.completed"),
            timeout=PROMPT,
            what="the bystander's job.completed and batch.completed",
            report=report,
        )
        prompt_seconds = time.monotonic() - started
        slow = Delivery.objects.filter(target_url=drip.url)
        wait_until(
            lambda: list(slow.values_list("status", flat=True)) == ["dead"] * SLOW_JOBS,
            timeout=PROMPT,
            what="every slow delivery dead",
            report=report,
        )
        # The sweeper publishes overdue deliveries every two seconds: let it run a few more times over the dead ones.
        sweeps = beat.log_tail(100_000).count("sweep-deliveries")
        wait_until(
            lambda: beat.log_tail(100_000).count("sweep-deliveries") >= sweeps + 3,
            timeout=60,
            what="three more sweeps",
            report=report,
        )
        posts = drip.counts()

    print(
        f"bystander's job.completed and batch.completed {prompt_seconds:.1f}s after submission, behind {SLOW_JOBS} "
        f"receivers dripping a byte every {DRIP_SECONDS:g}s; slow POSTs per delivery: {sorted(posts.values())}"
    )
    for delivery in slow.all():
        attempts = list(DeliveryAttempt.objects.filter(delivery=delivery).order_by("number"))
        assert delivery.attempts == MAX_ATTEMPTS, report()
        assert [attempt.number for attempt in attempts] == list(range(1, MAX_ATTEMPTS + 1))
        assert all(not attempt.ok and attempt.error.startswith("deadline") for attempt in attempts), [
            attempt.error for attempt in attempts
        ]
        assert all(attempt.duration_ms < (DEADLINE + 5) * 1000 for attempt in attempts), "the deadline cut each POST"
        assert posts[str(delivery.pk)] == MAX_ATTEMPTS, f"sent {posts[str(delivery.pk)]} times, max {MAX_ATTEMPTS}"
    assert drip.attempts_sent() == {str(number) for number in range(1, MAX_ATTEMPTS + 1)}
    # Deliveries run apart from the control tasks: the worker of the control queue never ran one.
    assert "Task callbacks.tasks.deliver[" not in workers["ops"].log_path.read_text(errors="replace"), (
        "the ops worker (reaper, dispatch, batch sweeps) ran webhook deliveries"
    )
