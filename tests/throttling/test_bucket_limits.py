"""The bucket script against real Redis: upper bounds on what it grants, whoever asks and however they interleave."""

from __future__ import annotations

import asyncio
import multiprocessing
import time

import pytest
from django.conf import settings

from project.redis import get_redis, redis_client
from tests.throttling.buckets_helpers import TEST_PREFIX, bench_buckets, most_in_any_window, take_all
from tests.throttling.hammer import hammer, hammer_init
from throttling.buckets import GRANTED, WAIT

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


def test_several_processes_never_get_more_than_burst_plus_rate_times_elapsed():
    rate, burst = 20.0, 5
    bench_buckets(rate=rate, burst=burst, ip_rate=1000, ip_burst=1000)
    args = [(settings.REDIS_URL, TEST_PREFIX, "example.test", "default", 2.5)] * 4

    context = multiprocessing.get_context("spawn")
    with context.Pool(4, initializer=hammer_init, initargs=(context.Barrier(4),)) as pool:
        per_process = pool.starmap(hammer, args)

    grants = [grant for grants in per_process for grant in grants]
    assert all(per_process), "every process should have been granted something"
    # Every grant happened inside [first ask, last answer]; the bucket allows burst + rate × that span at most.
    span = max(answered for _, answered in grants) - min(asked for asked, _ in grants)
    assert len(grants) <= burst + rate * span
    # Any one second: a grant answered in [t, t+1] was decided in [t - slowest reply, t+1].
    slowest = max(answered - asked for asked, answered in grants)
    assert most_in_any_window([answered for _, answered in grants], 1.0) <= burst + rate * (1.0 + slowest)


def test_the_egress_ip_bucket_limits_each_ip_on_its_own():
    buckets = bench_buckets(rate=1000, burst=1000, ip_rate=2, ip_burst=2)
    client = get_redis()

    started = time.monotonic()
    first = take_all(buckets, host="example.test", egress="10.0.0.1", seconds=1.0)
    elapsed = time.monotonic() - started
    other_ip = buckets.take(client, host="example.test", egress="10.0.0.2")

    assert len(first) <= 2 + 2 * elapsed  # the IP bucket's burst + rate × elapsed, though the domain allows 1000/s
    assert other_ip.status == GRANTED, "another egress IP has a full bucket of its own"


def test_the_domain_bucket_limits_all_egress_ips_together():
    buckets = bench_buckets(rate=3, burst=3, ip_rate=1000, ip_burst=1000)
    client, grants = get_redis(), 0
    stop_at = time.monotonic() + 1.0
    started = time.monotonic()
    while time.monotonic() < stop_at:
        for egress in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            grants += buckets.take(client, host="example.test", egress=egress).status == GRANTED
    elapsed = time.monotonic() - started

    assert grants <= 3 + 3 * elapsed


def test_a_refused_take_says_how_long_to_wait_and_takes_nothing():
    buckets = bench_buckets(rate=0.5, burst=1, ip_rate=1000, ip_burst=1000)
    client = get_redis()

    granted = buckets.take(client, host="example.test", egress="a")
    refused = [buckets.take(client, host="example.test", egress="a") for _ in range(3)]

    assert granted.status == GRANTED
    assert {decision.status for decision in refused} == {WAIT}
    assert all(1.5 < decision.wait <= 2.0 for decision in refused)  # one token at 0.5/s, nothing consumed meanwhile


def test_a_rate_of_zero_grants_the_burst_and_then_nothing():
    buckets = bench_buckets(rate=0, burst=2, ip_rate=1000, ip_burst=1000)

    decisions = [buckets.take(get_redis(), host="example.test", egress="a").status for _ in range(5)]

    assert decisions == [GRANTED, GRANTED, WAIT, WAIT, WAIT]


def test_scale_multiplies_both_rates():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1, scale=0.1)
    client = get_redis()

    buckets.take(client, host="example.test", egress="a")
    refused = buckets.take(client, host="example.test", egress="a")

    assert refused.status == WAIT and refused.wait > 0.5  # one token per second, not ten


def test_a_missing_script_is_loaded_again():
    buckets = bench_buckets(rate=10, burst=10, ip_rate=10, ip_burst=10)
    buckets.script.sha = "0" * 40  # what a Redis restart or SCRIPT FLUSH looks like to us

    decision = buckets.take(get_redis(), host="example.test", egress="a")

    assert decision.status == GRANTED
    assert buckets.script.sha != "0" * 40


def test_a_missing_script_is_loaded_again_by_an_asyncio_client():
    buckets = bench_buckets(rate=10, burst=10, ip_rate=10, ip_burst=10)
    buckets.script.sha = "0" * 40

    async def take():
        client = redis_client(asyncio=True)
        try:
            return await buckets.take_async(client, host="example.test", egress="a")
        finally:
            await client.aclose()

    decision = asyncio.run(take())

    assert decision.status == GRANTED
    assert buckets.script.sha != "0" * 40


def test_time_comes_from_redis_not_from_the_caller():
    buckets = bench_buckets(rate=1, burst=1, ip_rate=1, ip_burst=1)
    buckets.take(get_redis(), host="example.test", egress="a")

    stored = float(get_redis().get(buckets.bucket_key("example.test")).split()[1])

    seconds, micros = get_redis().time()
    assert abs(stored - (seconds + micros / 1e6)) < 5
