"""Test helpers for webhooks and batches: a local receiver, a real beat process, and exclusive workers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from django.conf import settings

from project.celery import app
from tests.sites import ServedSite
from tests.workers import BASE_DIR, Worker, test_database_url, workers_running

QUEUES = ("crawls", "control", "callbacks")
# Fast retries and sweeps for worker processes started by these tests; production values are minutes.
FAST_ENV = {
    "TRAWL_WEBHOOK_BACKOFF_SECONDS": "0.4",
    "TRAWL_WEBHOOK_BACKOFF_MAX_SECONDS": "3",
    "TRAWL_WEBHOOK_SWEEP_GRACE_SECONDS": "3",
    "TRAWL_BATCH_JOB_LOST_SECONDS": "4",
    "TRAWL_BATCH_LAUNCH_GRACE_SECONDS": "10",
}


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int
    at: float = field(default_factory=time.monotonic)

    @property
    def json(self) -> dict:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return self.headers.get("X-Trawl-Event", "")


class Receiver(ServedSite):
    """A webhook receiver on 127.0.0.1 recording every POST. Answers the scripted status codes first, then 200."""

    def __init__(self, *, script: Iterable[int] = (), default: int = 200) -> None:
        self.received: list[Received] = []
        self.script = list(script)
        self.default = default
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    code = receiver.script.pop(0) if receiver.script else receiver.default
                    receiver.received.append(Received(dict(self.headers.items()), body, code))
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        super().__init__(Handler, path="/hook")

    def events(self, event: str | None = None) -> list[Received]:
        with self.lock:
            return [item for item in self.received if event is None or item.event == event]

    def wait_for(self, predicate: Callable[[Receiver], bool], *, timeout: float, why: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return
            time.sleep(0.1)
        seen = [(item.event, item.answered) for item in self.events()]
        raise AssertionError(f"receiver: {why or 'condition'} not met within {timeout}s; received {seen}")


@contextlib.contextmanager
def running_alone(worker: Worker) -> Iterator[Worker]:
    """Start `worker` as the only consumer of its queues (see `exclusive`); stopped at the end, even on failure."""
    try:
        worker.start()
        with exclusive(worker):
            yield worker
    finally:
        worker.stop()


@contextlib.contextmanager
def exclusive(*workers: Worker, queues: Iterable[str] = QUEUES) -> Iterator[None]:
    """Other workers on this broker (say the session's crawl worker) stop consuming `queues` meanwhile, so tasks go
    only to `workers`, which run with the settings these tests need. The others are the workers this process started
    (a ping under load can miss one, and a missed worker silently takes jobs with the wrong settings)."""
    mine = {worker.hostname for worker in workers}
    started = set(workers_running(broker_url=app.conf.broker_url)) - mine
    pinged = {name for reply in app.control.ping(timeout=1.0) or [] for name in reply} - mine - started
    with pause(sorted(started), queues=queues), pause(sorted(pinged), queues=queues, answers_needed=False):
        yield


_paused: Counter = Counter()  # (hostname, queue) → how many pause() contexts hold it: nested ones must not resume it


@contextlib.contextmanager
def pause(hostnames: list[str], *, queues: Iterable[str] = QUEUES, answers_needed: bool = True) -> Iterator[None]:
    queues, attempts = list(queues), 5 if answers_needed else 1
    for queue in queues:
        first = [name for name in hostnames if not _paused[name, queue]]
        _control_all("cancel_consumer", queue, first, attempts=attempts, answers_needed=answers_needed)
        _paused.update((name, queue) for name in hostnames)
    try:
        yield
    finally:
        # A worker stopped or killed meanwhile cannot answer; every one still running must.
        alive = set(workers_running(broker_url=app.conf.broker_url))
        for queue in queues:
            _paused.subtract((name, queue) for name in hostnames)
            last = {name for name in hostnames if _paused[name, queue] <= 0}
            for names, needed in ((sorted(last & alive), answers_needed), (sorted(last - alive), False)):
                _control_all("add_consumer", queue, names, attempts=attempts if needed else 1, answers_needed=needed)


def _control_all(command: str, queue: str, hostnames: list[str], *, attempts: int, answers_needed: bool) -> None:
    """`celery control <command> <queue>` until every one of `hostnames` has answered."""
    waiting = set(hostnames)
    for _ in range(attempts):
        if not waiting:
            return
        replies = getattr(app.control, command)(queue, destination=sorted(waiting), reply=True, timeout=5) or []
        waiting -= {name for reply in replies for name in reply}
    if waiting and answers_needed:
        raise RuntimeError(f"{command} {queue}: no answer from {sorted(waiting)}")


def kill_hard(worker: Worker) -> None:
    """SIGKILL the worker and its pool processes at once: nothing acknowledges, requeues or records anything."""
    os.killpg(os.getpgid(worker.process.pid), signal.SIGKILL)
    worker.process.wait(10)


class Beat:
    """A real `celery beat` on the test database's schedule (django-celery-beat), stopped even when a test fails."""

    def __init__(self, *, log_dir: Path, env: dict | None = None) -> None:
        self.log_path = log_dir / "beat.log"
        self.extra_env = env or {}
        self.process: subprocess.Popen | None = None

    def start(self) -> Beat:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "PYTHONPATH": str(BASE_DIR),
            **self.extra_env,
        }
        command = [sys.executable, "-m", "celery", "-A", "project", "beat", "-l", "INFO"]
        # No -S: the scheduler celeryconfig ships (crawls.beat.LeaderScheduler) is the one under test.
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        pgid = os.getpgid(self.process.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait(5)


def sweepers_every(seconds: int) -> None:
    """Create beat's periodic tasks (a transactional test flushed them) and run the sweepers every `seconds`."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from project.periodic import periodic_tasks_ensure

    periodic_tasks_ensure()
    interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(name__in=["sweep-batches", "sweep-deliveries"]).update(interval=interval)
    PeriodicTask.objects.filter(name="dispatch-due-sources").update(enabled=False)
