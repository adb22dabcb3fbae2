"""How `make test` runs the suite on several pytest-xdist workers (`-n 3 --dist loadgroup`) without cross-talk.

- Each worker has a Redis database of its own (`worker_redis_url`); its test database gets pytest-django's per-worker
  suffix; servers, sites and receivers bind port 0.
- A test file is one unit of work, kept whole on one worker: its module fixtures (worker processes shared by its
  tests) start once. Files that share something machine-wide name one `xdist_group` (the RabbitMQ vhost): one unit.
- Units start slowest first, so the longest file does not begin last and leave the other workers idle at the end.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def worker_redis_url() -> str:
    """REDIS_URL (database 15 unless given) for a serial run; under pytest-xdist, worker gwN takes the database N
    below it (15, 14, 13...). The result goes into the environment, so the workers and scripts a test starts inherit
    it; those import the test settings again and must not step down once more, hence the worker id kept beside it."""
    url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker or os.environ.get("TRAWL_TEST_REDIS_WORKER") == worker:
        return url
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0) - int(worker.removeprefix("gw"))
    if db < 0:
        raise RuntimeError(f"REDIS_URL {url} leaves no Redis database for pytest-xdist worker {worker}")
    os.environ["TRAWL_TEST_REDIS_WORKER"] = worker
    return urlunsplit(parts._replace(path=f"/{db}"))


def units_group(items: list[pytest.Item]) -> None:
    """Every test without an `xdist_group` joins its file's group: loadgroup then hands out whole files."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def units_order(items: list[pytest.Item]) -> None:
    """Slowest units first (a stable sort: tests keep their order within a unit)."""
    weights: dict[str, float] = {}
    for item in items:
        group = _group_of(item)
        weights[group] = weights.get(group, 0) + _weight(item)
    items.sort(key=lambda item: -weights[_group_of(item)])


def _group_of(item: pytest.Item) -> str:
    return str(item.get_closest_marker("xdist_group").args[0])


def _weight(item: pytest.Item) -> float:
    """A guess at a test's duration without a previous run (CI starts from a clean checkout): what it starts counts,
    and a test's own `timeout` mark says how long its author expects it may take."""
    timeout = item.get_closest_marker("timeout")
    if timeout is not None and timeout.args:
        return float(timeout.args[0])
    return 10.0 if item.get_closest_marker("e2e") else 0.1
