"""How `make test` runs the suite on several pytest-xdist workers (`-n 3 --dist loadfile`) without cross-talk.

- Each worker has a Redis database of its own (`worker_redis_url`) and with it a RabbitMQ vhost of its own
  (tests/e2e/rabbitmq.py); its test database gets pytest-django's per-worker suffix; servers, sites and receivers
  bind port 0.
- A test file is one unit of work, kept whole on one worker: its module fixtures (worker processes shared by its
  tests) start once. Files that share something machine-wide are one unit together (`SHARED_UNITS`).
- Units start slowest first, so the longest file does not begin last and leave the other workers idle at the end.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest
from xdist.scheduler import LoadFileScheduling

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
# Files (by path prefix) that run one after another on one worker. The RabbitMQ modules: one server for the machine,
# whose queues they count and purge.
SHARED_UNITS = {"tests/e2e/test_rabbitmq_": "rabbitmq"}


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


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or the shared unit its file is part of."""
    path = nodeid.split("::", 1)[0]
    return next((unit for prefix, unit in SHARED_UNITS.items() if path.startswith(prefix)), path)


class UnitScheduling(LoadFileScheduling):
    """loadfile's scheduling with `unit_of` for units, handed out in collection order (`units_order`), not by how
    many tests each holds. (pytest-xdist's own xdist_group marks cannot work on pytest 9, whose test ids it can no
    longer rename.)"""

    def __init__(self, config: pytest.Config, log=None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


def units_order(items: list[pytest.Item]) -> None:
    """Slowest units first (a stable sort: tests keep their order within a unit). Every worker collects and sorts
    alike, as pytest-xdist requires."""
    weights: dict[str, float] = {}
    for item in items:
        unit = unit_of(item.nodeid)
        weights[unit] = weights.get(unit, 0) + _weight(item)
    items.sort(key=lambda item: -weights[unit_of(item.nodeid)])


def _weight(item: pytest.Item) -> float:
    """A guess at a test's duration without a previous run (CI starts from a clean checkout): what it starts counts,
    and a test's own `timeout` mark says how long its author expects it may take."""
    timeout = item.get_closest_marker("timeout")
    if timeout is not None and timeout.args:
        return float(timeout.args[0])
    return 10.0 if item.get_closest_marker("e2e") else 0.1
