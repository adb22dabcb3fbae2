"""Adaptive politeness: the controller in Redis, fed by every worker's responses, and its factor on the buckets."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.conf import settings
from scrapy import Request
from scrapy.exceptions import DownloadTimeoutError
from scrapy.http import Response

from project.redis import get_redis
from tests.crawler import trawl_crawler
from tests.throttling.adaptive_helpers import CONFIG, clean_keys, controller  # noqa: F401 (an autouse fixture)
from tests.throttling.buckets_helpers import TEST_PREFIX, bench_buckets
from throttling.adaptive import AdaptiveState
from throttling.buckets import GRANTED, WAIT, Limits, TokenBuckets
from throttling.controller import OBSERVE_SECONDS, Observed
from throttling.middlewares import ThrottleMiddleware


def test_one_caller_closes_each_window_with_every_workers_responses():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    ctl, client = controller(buckets), get_redis()

    answers = [
        ctl.observe(client, host="example.test", observed=Observed().add(latency=0.1, error=i % 2 == 0))
        for i in range(10)
    ]

    closed = [state for state in answers if state is not None]
    assert len(closed) == 2, "a window closes at its 5th response, then starts again"
    expected = max(CONFIG.error_decrease**2, 0.4 * CONFIG.error_margin)
    assert closed[0].factor == pytest.approx(expected), "3 errors of 5: below the 40% that came"
    assert AdaptiveState.from_redis(client.get(buckets.state_key("example.test"))) == closed[-1]


def test_a_window_of_errors_closes_early_and_a_healthy_one_runs_its_course():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    ctl, client = controller(buckets, window=2.0), get_redis()  # the shipped window: 2 s, closed early at 0.2 s

    def observe(host: str, *, errors: int) -> AdaptiveState | None:
        seen = Observed()
        for number in range(5):
            seen.add(latency=0.05, error=number < errors)
        return ctl.observe(client, host=host, observed=seen)

    assert observe("refusing.test", errors=3) is None and observe("healthy.test", errors=0) is None
    time.sleep(2.0 * CONFIG.error_window + 0.05)  # a fraction of the window, far from all of it

    refused = observe("refusing.test", errors=3)
    assert refused is not None and refused.factor < 1, "the site refuses: acted on at once, not after 2 s"
    assert observe("healthy.test", errors=0) is None, "a healthy window still waits for its 2 s"


def test_the_factor_slows_every_workers_bucket():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    client = get_redis()
    client.set(buckets.state_key("example.test"), AdaptiveState(factor=0.1, reason="test").as_redis())

    assert buckets.take(client, host="www.example.test", egress="a").status == GRANTED
    refused = buckets.take(client, host="www.example.test", egress="b")

    assert refused.status == WAIT and refused.wait > 0.5, "one token per second (10 × 0.1), not ten"


def test_a_rule_with_adaptive_off_ignores_the_controller():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1, adaptive=False)
    client = get_redis()
    client.set(buckets.state_key("example.test"), AdaptiveState(factor=0.1).as_redis())
    ctl = controller(buckets)

    assert all(
        ctl.observe(client, host="example.test", observed=Observed().add(latency=1.0, error=True)) is None
        for _ in range(10)
    )
    buckets.take(client, host="example.test", egress="a")
    time.sleep(0.15)
    assert buckets.take(client, host="example.test", egress="a").status == GRANTED


def test_domains_without_a_rule_adapt_per_the_defaults():
    buckets = TokenBuckets(defaults=Limits(rate=5, burst=1, ip_rate=5, ip_burst=1), prefix=TEST_PREFIX)
    client = get_redis()
    client.set(buckets.rules_loaded_key, "1", ex=600)
    ctl = controller(buckets)

    states = [
        ctl.observe(client, host="unruled.test", observed=Observed().add(latency=None, error=True)) for _ in range(5)
    ]

    # An erroring window closes at its third error (AdaptiveConfig.min_errors), before the five others need.
    assert states[2] is not None and states[2].factor == pytest.approx(0.25), "all refused: a quarter, at once"
    assert states[:2] == [None, None]
    assert client.get(buckets.state_key("unruled.test"))


def test_the_middleware_feeds_responses_and_timeouts_of_every_request():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    crawler = trawl_crawler()
    middleware = ThrottleMiddleware(
        buckets=buckets,
        redis_url=settings.REDIS_URL,
        egress="w",
        stats=crawler.stats,
        controller=controller(buckets, min_requests=4),
    )
    url = "http://example.test/p"

    async def run() -> None:
        for status in (200, 503, 200):
            await middleware.process_response(
                Request(url, meta={"download_latency": 0.1}), Response(url, status=status)
            )
        await middleware.process_exception(Request(url), DownloadTimeoutError("took too long"))
        await middleware.close()

    asyncio.run(run())

    state = AdaptiveState.from_redis(get_redis().get(buckets.state_key("example.test")))
    assert state.factor == pytest.approx(0.5 * CONFIG.error_margin), "2 errors (a 503 and a timeout) of 4 responses"
    assert crawler.stats.get_value("throttle/adaptive_decisions") == 1
    # Indexed as slowed, by its factor: what /metrics and /api/stats/ read instead of every domain's state.
    assert get_redis().zscore(buckets.adaptive_index_key(), "example.test") == pytest.approx(state.factor)


def test_the_middleware_adds_a_hosts_responses_to_its_window_together():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    crawler = trawl_crawler()
    ctl = controller(buckets, min_requests=20)
    middleware = ThrottleMiddleware(
        buckets=buckets, redis_url=settings.REDIS_URL, egress="w", stats=crawler.stats, controller=ctl
    )
    calls, observe = [], ctl.observe_async

    async def counted(client, *, host, observed):
        calls.append((host, observed.requests, observed.errors))
        return await observe(client, host=host, observed=observed)

    ctl.observe_async = counted
    url = "http://example.test/p"

    async def run() -> None:
        for status in [200] * 19 + [503]:
            await middleware.process_response(
                Request(url, meta={"download_latency": 0.1}), Response(url, status=status)
            )
        assert calls == [], "counted in the worker first"
        await asyncio.sleep(OBSERVE_SECONDS + 0.2)
        assert calls == [("example.test", 20, 1)], "one call for the host's 20 responses"
        await middleware.close()

    asyncio.run(run())

    assert crawler.stats.get_value("throttle/adaptive_decisions") == 1, "the 20 responses closed the window"
