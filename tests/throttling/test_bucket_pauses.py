"""Retry-After against real Redis: a pause seen by every client, never shortened; the header read as seconds or a
date."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from project.redis import get_redis, redis_client
from tests.throttling import buckets_helpers
from tests.throttling.buckets_helpers import bench_buckets
from throttling.buckets import WAIT, retry_after_seconds
from throttling.services import throttle_buckets, throttle_create, throttle_rules_load

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]
publish = buckets_helpers.publish  # a fixture


def test_a_pause_is_seen_by_every_other_client(publish):
    publish(throttle_create, domain="example.com", rate=100, burst=100, ip_rate=100, ip_burst=100)
    throttle_rules_load()
    other_client = redis_client()

    throttle_buckets().pause(get_redis(), host="www.example.com", seconds=30)
    seen = [throttle_buckets().take(other_client, host="example.com", egress=egress) for egress in ("a", "b")]

    assert [decision.status for decision in seen] == [WAIT, WAIT]
    assert all(29 < decision.wait <= 30.1 for decision in seen)


def test_a_shorter_pause_never_shortens_a_longer_one():
    buckets = bench_buckets(rate=100, burst=100, ip_rate=100, ip_burst=100)
    client = get_redis()

    buckets.pause(client, host="example.test", seconds=30)
    left = buckets.pause(client, host="example.test", seconds=1)

    assert left > 29


def test_retry_after_is_read_as_seconds_or_as_a_date():
    now = time.time()

    assert retry_after_seconds(b"120", now=now) == 120
    assert 59 <= retry_after_seconds(formatdate(now + 60, usegmt=True), now=now) <= 61
    assert retry_after_seconds(formatdate(now - 60, usegmt=True), now=now) == 0
    assert retry_after_seconds(b"soon", now=now) is None
    assert retry_after_seconds(None, now=now) is None
