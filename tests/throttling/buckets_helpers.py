"""Helpers of the throttle tests: the throttle's Redis keys flushed, services run with their Redis publication, token
buckets under a test prefix, asking as fast as one client can, and counting grants in a sliding window."""

from __future__ import annotations

import time

import pytest

from project.redis import get_redis, redis_key
from throttling.buckets import GRANTED, Limits, TokenBuckets

TEST_PREFIX = "trawl:test-throttle"


def flush_throttle_keys() -> None:
    client = get_redis()
    for pattern in (redis_key("throttle", "*"), f"{TEST_PREFIX}:*"):
        keys = list(client.scan_iter(pattern, count=1000))
        if keys:
            client.delete(*keys)


@pytest.fixture
def publish(django_capture_on_commit_callbacks):
    """Run a service and the Redis publication it queues for after the commit."""

    def run(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return run


def bench_buckets(**rule) -> TokenBuckets:
    """Buckets under a prefix of their own, with one rule for example.test, mirrored as the services would."""
    buckets = TokenBuckets(defaults=Limits(rate=1, burst=1, ip_rate=1, ip_burst=1), prefix=TEST_PREFIX)
    client = get_redis()
    client.set(buckets.rule_key("example.test"), Limits(**rule).as_redis())
    client.set(buckets.rules_loaded_key, "1", ex=600)
    return buckets


def take_all(buckets: TokenBuckets, *, host: str, egress: str, seconds: float) -> list[float]:
    """Ask as fast as one client can for `seconds`; return when each grant was answered."""
    client, grants = get_redis(), []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        if buckets.take(client, host=host, egress=egress).status == GRANTED:
            grants.append(time.monotonic())
    return grants


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    most, first = 0, 0
    for last, moment in enumerate(times):
        while moment - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most
