"""Real `celery worker` subprocesses for end-to-end tests, stopped even when a test fails."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from project.celery import app

BASE_DIR = Path(__file__).resolve().parent.parent
# A crawl worker's env for prefork semantics: one crawl per process, and with Celery's prefetch of 1 and late
# acknowledgement a process holds one crawl message at a time (the default crawl host takes and prefetches many).
ONE_CRAWL_PER_PROCESS = {"TRAWL_CRAWLS_PER_PROCESS": "1"}
_running: dict[str, Worker] = {}  # hostname → worker, for every worker this test process started and not yet stopped


def script_run(script: str, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `script` with this Python in a process of its own, from the project's folder, its output captured."""
    command = [sys.executable, "-c", script, *args]
    return subprocess.run(command, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=timeout)


def last_json_line(done: subprocess.CompletedProcess) -> Any:
    """What a script run by `script_run` reported: the JSON on its last line of output."""
    return json.loads(done.stdout.strip().splitlines()[-1])


def workers_running(*, broker_url: str) -> list[str]:
    """Hostnames of the workers this process started on `broker_url` that are still running."""
    return [name for name, worker in _running.items() if worker.broker_url == broker_url and worker.alive()]


def test_database_url() -> str:
    """The URL of the database the tests are using right now, for processes we start."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    auth = f"{user}:{db.get('PASSWORD') or ''}@" if user else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


class Worker:
    def __init__(
        self,
        *,
        queues: str = "crawls,control,callbacks",
        concurrency: int = 1,
        env: dict | None = None,
        log_dir: Path,
        cwd: Path | None = None,  # its working directory (a host of its own, say): the project's folder unless given
    ) -> None:
        self.name = f"trawl-test-{uuid.uuid4().hex[:8]}@%h"
        self.queues = queues
        self.concurrency = concurrency
        self.extra_env = env or {}
        self.log_path = log_dir / f"{self.name.split('@')[0]}.log"
        self.process: subprocess.Popen | None = None
        self.started_on = ""  # the broker it was started on (CELERY_BROKER_URL, else REDIS_URL)
        self.cwd = cwd or BASE_DIR

    @property
    def hostname(self) -> str:
        return self.name.replace("%h", os.uname().nodename)

    @property
    def broker_url(self) -> str:
        return self.started_on or self.extra_env.get("REDIS_URL", settings.REDIS_URL)

    def start(self, timeout: float = 60) -> Worker:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "PYTHONPATH": str(BASE_DIR),
            **self.extra_env,
        }
        self.started_on = env.get("CELERY_BROKER_URL") or env["REDIS_URL"]
        command = [
            sys.executable,
            "-m",
            "project.worker",  # `celery -A project worker`, lighter (project/worker.py)
            "-Q",
            self.queues,
            "-c",
            str(self.concurrency),
            "-n",
            self.name,
            "--without-gossip",
            "--without-mingle",
            "-l",
            "INFO",
        ]
        with open(self.log_path, "ab") as log:
            # A session of its own, so stopping the worker also stops its pool processes.
            self.process = subprocess.Popen(
                command, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        hostname = self.hostname
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}:\n{self.log_tail()}")
            if app.control.ping(destination=[hostname], timeout=0.5):
                _running[hostname] = self
                return
        self.stop()
        raise RuntimeError(f"worker not ready within {timeout}s:\n{self.log_tail()}")

    def wait_idle(self, timeout: float = 30) -> None:
        """Until the worker runs no task: a job's row reads final a moment before its worker has stored the job's log
        and run its follow-ups, and a test's database flush racing those writes can deadlock on PostgreSQL."""
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            replies = app.control.inspect(destination=[self.hostname], timeout=1.0).active() or {}
            if replies.get(self.hostname) == []:
                return
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pool_pids(self) -> list[int]:
        import psutil

        return [child.pid for child in psutil.Process(self.process.pid).children()]

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20) -> None:
        _running.pop(self.hostname, None)
        if self.process is None or self.process.poll() is not None:
            return
        pgid = os.getpgid(self.process.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait(5)
        # Pool processes left behind by a killed parent still belong to the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
