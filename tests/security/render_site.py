"""For the attacks through rendered pages (tests/security/test_render_helpers.py, test_render_bounds.py): the
attacker's site on ATTACKER_HOST that records every request with its headers and can hold one path's answer until
the test lets it go; a production crawl worker with a secret of its own in its environment; the processes it runs."""

from __future__ import annotations

import base64
import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from tests.security.conftest import ATTACKER_HOST, MODES
from tests.sites import ServedSite, send_body
from tests.workers import Worker

Answer = tuple[int, dict[str, str], str | bytes]
# In the worker's environment: it must reach no process the worker starts for rendering.
WORKER_CANARY = "TRAWL_TEST_WORKER_CANARY"
CANARY_VALUE = "canary-" + "c" * 32
SECRET_NAMES = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", WORKER_CANARY)


class RecordingSite(ServedSite):
    """`routes` maps a path to an answer (status, headers, body) or to a function of the request's path giving one.
    Every request is recorded (path, headers); a path in `held` is answered only once `release()` was called."""

    def __init__(self, routes: dict[str, Answer | Callable[[str], Answer]], *, held: tuple[str, ...] = ()) -> None:
        self.routes = routes
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.held = held
        self.holding = threading.Event()  # a held request arrived
        self._released = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.requests.append((self.path, {name.lower(): value for name, value in self.headers.items()}))
                if self.path in site.held:
                    site.holding.set()
                    site._released.wait(120)
                answer = site.routes.get(self.path, (404, {}, "not here"))
                status, headers, body = answer(self.path) if callable(answer) else answer
                send_body(self, status, body, headers)

            def log_message(self, *args):
                pass

        super().__init__(Handler, host=ATTACKER_HOST)

    def release(self) -> None:
        self._released.set()

    def __exit__(self, *exc) -> None:
        self.release()
        super().__exit__(*exc)

    def hits(self, path: str) -> int:
        return sum(1 for seen, _ in self.requests if seen == path)


@pytest.fixture
def render_worker(mode, mode_web_settings, django_db_setup, django_db_blocker, redis_server, tmp_path):
    """A real crawl worker with `mode`'s settings whose environment also holds WORKER_CANARY."""
    from tests.callbacks.harness import running_alone

    env = {**MODES[mode], WORKER_CANARY: CANARY_VALUE}
    worker = Worker(queues="crawls,control,callbacks", concurrency=1, env=env, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def render_helpers(worker: Worker) -> dict[str, list[psutil.Process]]:
    """The worker's Playwright drivers (node) and Chromium processes (browser, zygotes, renderers ...)."""
    found: dict[str, list[psutil.Process]] = {"driver": [], "chromium": []}
    for pid in worker.pool_pids():
        for process in psutil.Process(pid).children(recursive=True):
            try:
                command = process.cmdline()
            except psutil.Error:
                continue
            name = Path(command[0]).name if command else ""
            if "run-driver" in command:
                found["driver"].append(process)
            elif "chrom" in name:
                found["chromium"].append(process)
    return found


def environ_of(process: psutil.Process) -> dict[str, str]:
    """What any process of the same uid reads in /proc/<pid>/environ."""
    raw = Path(f"/proc/{process.pid}/environ").read_bytes()
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if entry)
    return {name: value for name, _, value in pairs}


class ForwardProxy(ServedSite):
    """A forward proxy asking for credentials (`user:password`, HTTP basic), as a paid proxy does: it answers 407
    without them, else fetches the absolute-form URL it was asked for and marks the request it forwards (`Via`).
    `asked` records each request's target and whether its credentials were right."""

    def __init__(self, user: str, password: str) -> None:
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.asked: list[tuple[str, bool]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                authorized = self.headers.get("Proxy-Authorization") == proxy.expected
                proxy.asked.append((self.path, authorized))
                if not authorized:
                    return send_body(self, 407, "", {"Proxy-Authenticate": 'Basic realm="proxy"'})
                target = urlsplit(self.path)
                skipped = {"proxy-authorization", "proxy-connection", "connection"}
                headers = {name: value for name, value in self.headers.items() if name.lower() not in skipped}
                connection = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=30)
                try:
                    path = target.path + (f"?{target.query}" if target.query else "")
                    connection.request("GET", path or "/", headers={**headers, "Via": "1.1 test-proxy"})
                    answer = connection.getresponse()
                    body = answer.read()
                    kept = {name: value for name, value in answer.getheaders() if name.lower() == "content-type"}
                    send_body(self, answer.status, body, kept)
                finally:
                    connection.close()

            def log_message(self, *args):
                pass

        super().__init__(Handler, host=ATTACKER_HOST)
