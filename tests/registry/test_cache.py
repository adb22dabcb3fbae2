"""The per-process routing cache: served from memory, dropped everywhere within seconds of any registry write."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest
from django.conf import settings
from django.db import transaction

from registry.cache import VersionCache, generation_read
from registry.models import ScraperVersion
from registry.services import traffic_set, version_create, version_route
from tests import workers
from tests.registry.factories import LINK_SPIDER, make_scraper


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counter:
    """A stand-in for the Redis counter that counts how often it is read."""

    def __init__(self) -> None:
        self.value: str | None = "1"
        self.reads = 0

    def __call__(self) -> str | None:
        self.reads += 1
        return self.value


def loader(results):
    calls = []

    def load():
        calls.append(1)
        return results[len(calls) - 1]

    return load, calls


def test_cached_until_the_counter_moves():
    counter, clock = Counter(), Clock()
    cache = VersionCache(check_every=0, max_age=300, read_generation=counter, clock=clock)
    load, calls = loader(["v1", "v2"])

    first = [cache.get("shop", load) for _ in range(5)]
    counter.value = "2"
    second = cache.get("shop", load)

    assert first == ["v1"] * 5 and second == "v2"
    assert len(calls) == 2
    assert counter.reads == 6, "check_every=0 asks Redis before every answer"


def test_the_counter_is_read_at_most_every_check_interval():
    counter, clock = Counter(), Clock()
    cache = VersionCache(check_every=1.0, max_age=300, read_generation=counter, clock=clock)
    load, _ = loader(["v1", "v2"])

    cache.get("shop", load)
    counter.value = "2"
    clock.now += 0.5
    within = cache.get("shop", load)
    clock.now += 0.6
    after = cache.get("shop", load)

    assert (within, after) == ("v1", "v2")
    assert counter.reads == 2


def test_without_redis_nothing_is_cached():
    counter = Counter()
    counter.value = None
    cache = VersionCache(check_every=0, max_age=300, read_generation=counter, clock=Clock())
    load, calls = loader(["v1", "v2", "v3"])

    answers = [cache.get("shop", load) for _ in range(3)]

    assert answers == ["v1", "v2", "v3"]
    assert len(calls) == 3


def test_max_age_is_only_a_backstop():
    counter, clock = Counter(), Clock()
    cache = VersionCache(check_every=0, max_age=300, read_generation=counter, clock=clock)
    load, _ = loader(["v1", "v2"])

    cache.get("shop", load)
    clock.now += 299
    assert cache.get("shop", load) == "v1"
    clock.now += 2
    assert cache.get("shop", load) == "v2"


def test_clear_forgets_at_once():
    cache = VersionCache(check_every=60, max_age=300, read_generation=Counter(), clock=Clock())
    load, _ = loader(["v1", "v2"])

    cache.get("shop", load)
    cache.clear()

    assert cache.get("shop", load) == "v2"


@pytest.mark.django_db(transaction=True)
def test_a_write_moves_the_redis_counter_only_once_committed():
    scraper = make_scraper("shop")
    before = generation_read()
    with transaction.atomic():
        version_create(scraper=scraper, version="1.0.0", spider=LINK_SPIDER, is_default=True)
        during = generation_read()
    after = generation_read()

    assert during == before, "other processes must not reload before the write is visible to them"
    assert int(after) > int(before)


@pytest.mark.django_db(transaction=True)
def test_routing_reads_the_database_once_per_change(django_assert_max_num_queries):
    scraper = make_scraper("shop")
    version_create(scraper=scraper, version="1.0.0", spider=LINK_SPIDER, is_default=True)
    version_route(scraper=scraper)

    with django_assert_max_num_queries(0):
        picks = {version_route(scraper=scraper).version for _ in range(50)}
    version_create(scraper=scraper, version="1.1.0", spider=LINK_SPIDER, is_default=True)

    assert picks == {"1.0.0"}
    assert version_route(scraper=scraper).version == "1.1.0"


@pytest.mark.django_db(transaction=True)
def test_a_traffic_change_here_is_seen_by_another_process_within_seconds():
    scraper = make_scraper("shop")
    stable = version_create(scraper=scraper, version="1.0.0", spider=LINK_SPIDER, is_default=True, traffic_pct=100)
    canary = version_create(scraper=scraper, version="1.1.0", spider=LINK_SPIDER, variant="canary")
    probe = RouteProbe("shop", seconds=30)
    try:
        assert probe.next_change(timeout=20)["version"] == "1.0.0"

        # Behind the services' back (no post_save, no counter bump): read from the database, 50/50 would show
        # 1.1.0 within a few routes; the probe keeps serving its cached 100/0 instead.
        ScraperVersion.objects.filter(pk__in=[stable.pk, canary.pk]).update(traffic_pct=50)
        assert probe.next_change(timeout=1.5) is None, "the other process should be serving its cached versions"

        changed_at = time.time()
        traffic_set(scraper=scraper, allocation={"1.0.0": 0, "1.1.0": 100})
        seen = probe.next_change(timeout=5)
    finally:
        probe.stop()

    assert seen is not None and seen["version"] == "1.1.0"
    assert seen["at"] - changed_at < 3, f"seen after {seen['at'] - changed_at:.2f}s"


class RouteProbe:
    """tests/registry/route_probe.py in a subprocess; its output lines read by a thread so waits can time out."""

    def __init__(self, scraper: str, *, seconds: float) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": workers.test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "PYTHONPATH": str(workers.BASE_DIR),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.registry.route_probe", scraper, str(seconds)],
            cwd=workers.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next_change(self, *, timeout: float) -> dict | None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            raise AssertionError(f"probe exited {self.process.wait()}: {self.process.stderr.read()}")
        return json.loads(line)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(5)
