"""Dependencies a chaos test owns and breaks at will: a PostgreSQL cluster and a Redis server of its own (never the
machine's shared 5432 and 6379, which other tests and people use), a gunicorn web process, and a prober calling it.

Nothing here imports Django: the driver starts these first, then points Django at them (DATABASE_URL, REDIS_URL).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from project.redis.server import redis_start_if_absent

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _pg_binary(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), "")
    if not found:
        raise RuntimeError(f"{name} is not installed: the chaos test needs a PostgreSQL of its own")
    return found


class PrivatePostgres:
    """A throwaway cluster in its own folder on a free port. PostgreSQL refuses to run as root, so as root the
    cluster belongs to the `postgres` user and every pg_ctl call runs as that user (runuser)."""

    def __init__(self, *, max_connections: int = 200) -> None:
        self.root = Path(os.environ.get("TRAWL_CHAOS_TMP", "/tmp")) / f"trawl-chaos-pg-{os.getpid()}-{free_port()}"
        self.max_connections = max_connections
        self.data, self.log = self.root / "data", self.root / "postgres.log"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/trawl"

    def _as_owner(self, *command: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)

    def _run(self, *command: str) -> None:
        subprocess.run(self._as_owner(*command), check=True, capture_output=True, timeout=120)

    def create(self) -> PrivatePostgres:
        self.root.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(_pg_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as admin:
            admin.execute("CREATE DATABASE trawl")
        return self

    def start(self) -> None:
        # fsync off: an immediate stop is a crash of the server, not of the machine, so nothing is lost without it.
        # UTC: Django then never sends `SET TIME ZONE`, which a pooler in transaction mode could not keep per client.
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            f" -c max_connections={self.max_connections} -c timezone=UTC"
        )
        self._run(_pg_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def crash(self) -> None:
        """Immediate shutdown: every connection dropped mid-statement, crash recovery at the next start."""
        self._run(_pg_binary("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self._run(_pg_binary("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


class ChaosRedis:
    """A redis-server of our own with an append-only file (as `make run` runs it), restarted with or without it."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.aof, self.log = root / "redis-aof", str(root / "redis.log")
        self.process: subprocess.Popen | None = None

    def start(self) -> ChaosRedis:
        self.process = redis_start_if_absent(self.url, log_path=self.log, data_dir=str(self.aof))
        assert self.process is not None, f"something already answers on port {self.port}"
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)
        self.process = None

    def restart(self, *, keep_data: bool, down_seconds: float) -> None:
        self.stop()
        if not keep_data:
            shutil.rmtree(self.aof, ignore_errors=True)
        time.sleep(down_seconds)
        self.start()


class Web:
    """The web as `make run` runs it (gunicorn, Procfile), on a free port."""

    def __init__(self, env: dict, log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env, self.log_path = env, log_dir / "web.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> Web:
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        command = [gunicorn, "project.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=BASE_DIR, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.url}/healthz", timeout=2)
                return self
            assert self.process.poll() is None, self.log_path.read_text()
            time.sleep(0.3)
        raise RuntimeError(f"the web never answered\n{self.log_path.read_text()}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            os.killpg(os.getpgid(self.process.pid), signal.SIGTERM)
            self.process.wait(20)


class Prober(threading.Thread):
    """GET each path every `period` s, as a client polling a job would; counts answers by status, or by error."""

    def __init__(self, base: str, paths: list[str], *, token: str, period: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.base, self.paths, self.token, self.period = base, paths, token, period
        self.answers: Counter = Counter()
        self.bad: list[str] = []  # what a client must never see: a 500, a reset, a timeout
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.period):
            for path in self.paths:
                self.answers[self._get(path)] += 1

    def _get(self, path: str) -> str:
        request = urllib.request.Request(f"{self.base}{path}", headers={"Authorization": f"Token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return str(response.status)
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                self.bad.append(f"{path}: {exc.code} {exc.read()[:300]!r}")
            return str(exc.code)
        except OSError as exc:
            self.bad.append(f"{path}: {type(exc).__name__}: {exc}")
            return type(exc).__name__

    def stop(self) -> None:
        self.halt.set()
        self.join(40)


def write_wide_site(root: Path, *, lists: int, per_list: int) -> None:
    """An index linking `lists` list pages, each linking `per_list` products: two links deep."""
    root.mkdir(parents=True)
    links = "".join(f'<a href="/list-{n}.html">list {n}</a>' for n in range(1, lists + 1))
    (root / "index.html").write_text(f"<html><title>Shop</title><body>{links}</body></html>")
    for n in range(1, lists + 1):
        numbers = range((n - 1) * per_list + 1, n * per_list + 1)
        links = "".join(f'<a href="/product-{p}.html">product {p}</a>' for p in numbers)
        (root / f"list-{n}.html").write_text(f"<html><title>List {n}</title><body>{links}</body></html>")
        for p in numbers:
            (root / f"product-{p}.html").write_text(f"<html><title>Product {p}</title><h1>Product {p}</h1></html>")
