"""Trawl on one host of the fleet: its own copy of the checkout (and so its own var/), its own processes, started in
its namespace as `make run`'s Procfile starts them, with the shared services' addresses on the bridge."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.fleet.network import Host

BASE_DIR = Path(__file__).resolve().parent.parent.parent
LEFT_OUT = shutil.ignore_patterns(".git", ".venv", "var", "__pycache__", "*.pyc", ".ruff_cache", ".pytest_cache")
WEB_PORT = 8000
PROCESSES = {
    "web": ["-m", "gunicorn", "project.wsgi", "--bind", "{address}:8000", "--workers", "1", "--threads", "4"],
    "crawl": ["-m", "project.worker", "-Q", "crawls", "-c", "2", "-n", "crawl@%h"],
    "ops": ["-m", "project.worker", "-Q", "control,callbacks", "-c", "2", "-n", "ops@%h"],
    "beat": ["-m", "celery", "-A", "project", "beat", "-l", "INFO"],
}
WORKER_OPTIONS = ["--without-gossip", "--without-mingle", "-l", "INFO"]


class FleetHost:
    """One host: `start(role)` starts a process of the role in the host's namespace; `kill_everything` ends them all
    at once; `cut`/`restore` take its link down and up."""

    def __init__(self, host: Host, *, root: Path, env: dict[str, str]) -> None:
        self.host = host
        self.checkout = root / host.hostname
        self.logs = root / f"{host.hostname}-logs"
        self.env = {
            **env,
            "HOSTNAME_WANTED": host.hostname,
            "PYTHONPATH": str(self.checkout),
            "TRAWL_PACKAGE_FIND_LINKS": str(self.checkout / "wheelhouse"),
            "TRAWL_PACKAGE_NO_INDEX": "1",
        }
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def web_url(self) -> str:
        return f"http://{self.host.address}:{WEB_PORT}"

    def install(self) -> FleetHost:
        """A copy of the checkout of its own: nothing one host writes under var/ is there for another."""
        from tests.packages import dep_wheels

        shutil.copytree(BASE_DIR, self.checkout, ignore=LEFT_OUT)
        self.logs.mkdir(parents=True, exist_ok=True)
        dep_wheels(self.checkout / "wheelhouse")  # this host's own stand-in for a package index (no internet here)
        return self

    def start(self, role: str, *, ready_timeout: float = 90) -> FleetHost:
        argv = [part.replace("{address}", self.host.address) for part in PROCESSES[role]]
        if role in ("crawl", "ops"):
            argv += WORKER_OPTIONS
        log_path = self.logs / f"{role}.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            self.processes[role] = subprocess.Popen(
                self.host.command([sys.executable, *argv]),
                cwd=self.checkout,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready(role, log_path, offset, ready_timeout)
        return self

    def _wait_ready(self, role: str, log_path: Path, offset: int, timeout: float) -> None:
        marker = {"crawl": b" ready.", "ops": b" ready.", "beat": b"beat: Starting"}.get(role)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            process = self.processes[role]
            if process.poll() is not None:
                raise RuntimeError(f"{self.host.hostname} {role} exited: {self.log_tail(role)}")
            if marker is None:
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(f"{self.web_url}/healthz", timeout=2)
                    return
            else:
                with open(log_path, "rb") as log:
                    log.seek(offset)
                    if marker in log.read():
                        return
            time.sleep(0.3)
        raise RuntimeError(f"{self.host.hostname} {role} not ready within {timeout}s: {self.log_tail(role)}")

    def alive(self, role: str) -> bool:
        process = self.processes.get(role)
        return process is not None and process.poll() is None

    def stop_role(self, role: str, *, timeout: float = 90) -> None:
        """SIGTERM, as a deploy stops a process: a crawl worker's warm shutdown hands its crawls back."""
        process = self.processes.pop(role, None)
        if process is None or process.poll() is not None:
            return
        os.killpg(os.getpgid(process.pid), signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(os.getpgid(process.pid), signal.SIGKILL)
            process.wait(10)

    def kill_everything(self) -> None:
        self.host.kill_everything()
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
        self.processes.clear()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(os.getpgid(process.pid), signal.SIGTERM)
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(40)
        self.kill_everything()

    def files_named(self, pattern: str) -> list[Path]:
        return sorted(self.checkout.rglob(pattern))

    def log_tail(self, role: str, lines: int = 40) -> str:
        with contextlib.suppress(FileNotFoundError):
            text = (self.logs / f"{role}.log").read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""

    def logs_tail(self, lines: int = 30) -> str:
        return "\n".join(f"--- {self.host.hostname} {role} ---\n{self.log_tail(role, lines)}" for role in PROCESSES)
