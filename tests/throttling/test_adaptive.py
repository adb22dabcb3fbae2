"""Adaptive politeness: the rule (pure), the controller in Redis, and where its verdict shows."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.conf import settings
from django.urls import reverse
from scrapy import Request
from scrapy.exceptions import DownloadTimeoutError
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from project.redis import get_redis
from tests.clients import client_for
from tests.throttling.test_buckets import TEST_PREFIX, bench_buckets, flush_throttle_keys, publish  # noqa: F401
from throttling.adaptive import AdaptiveConfig, AdaptiveState, Window, adapt, requeue_delay
from throttling.buckets import GRANTED, WAIT, Limits, TokenBuckets
from throttling.controller import OBSERVE_SECONDS, AdaptiveController, Observed
from throttling.middlewares import ThrottleMiddleware
from throttling.services import throttle_buckets, throttle_create, throttle_update

CONFIG = AdaptiveConfig()
HEALTHY = Window(requests=20, errors=0, latency=0.05)


@pytest.fixture(autouse=True)
def clean_keys():
    flush_throttle_keys()
    yield
    flush_throttle_keys()


# --- the rule -------------------------------------------------------------------------------------


def test_errors_cut_the_rate_at_least_in_half_and_say_why():
    state = adapt(AdaptiveState(factor=1.0, baseline=0.05), Window(requests=20, errors=4, latency=0.05))

    assert state.factor == pytest.approx(0.5)
    assert "20% errors" in state.reason


def test_mostly_refused_windows_cut_to_what_got_through_but_never_below_a_quarter_at_once():
    through = 0.3 * CONFIG.ceiling_margin  # just below the 30% that got through
    assert adapt(AdaptiveState(), Window(requests=20, errors=14, latency=0.05)).factor == pytest.approx(through)
    assert adapt(AdaptiveState(), Window(requests=20, errors=20, latency=0.0)).factor == pytest.approx(0.25)


def test_the_window_right_after_an_error_cut_is_not_cut_again_for_the_old_rates_answers():
    cut = adapt(AdaptiveState(), Window(requests=20, errors=10, latency=0.05))
    held = adapt(cut, Window(requests=20, errors=8, latency=0.05))
    assert held.factor == cut.factor, "those errors answered requests sent before the cut"
    assert adapt(held, Window(requests=20, errors=8, latency=0.05)).factor < cut.factor, "the next one counts"


def test_latency_well_above_the_baseline_slows_down_before_it_doubles():
    state = adapt(AdaptiveState(factor=0.8, baseline=0.5), Window(requests=20, errors=0, latency=0.8))

    assert state.factor == pytest.approx(0.6), "1.6 × the baseline is distress: the rate falls before it doubles"
    assert "latency" in state.reason
    assert state.baseline == 0.5, "a slow window must not drag the baseline up"


def test_latency_that_creeps_up_window_by_window_is_caught_before_it_doubles():
    state, latency = AdaptiveState(baseline=0.5), 0.5
    while state.factor == 1.0:
        latency += 0.025  # 5 % of where it started, every window
        state = adapt(state, Window(requests=20, errors=0, latency=latency))
        assert latency < 1.0, f"still at full rate with the latency at {latency:.2f}s (baseline {state.baseline:.2f}s)"


def test_a_site_answering_in_milliseconds_is_never_slowed_by_latency_noise():
    state = AdaptiveState(baseline=0.002)
    for latency in (0.01, 0.05, 0.12, 0.004, 0.18, 0.03) * 5:
        state = adapt(state, Window(requests=50, errors=0, latency=latency))
        assert state.factor == 1.0, f"{latency}s against a {state.baseline:.3f}s baseline is no distress"


def test_latency_within_the_baseline_band_is_healthy():
    state = AdaptiveState(factor=0.5, baseline=0.05, calm=CONFIG.healthy_windows)
    state = adapt(state, Window(requests=20, errors=0, latency=0.09))

    assert state.factor > 0.5


def test_rising_latency_holds_the_rate_where_it_is():
    state = AdaptiveState(factor=0.5, baseline=1.0, calm=10)
    state = adapt(state, Window(requests=20, errors=0, latency=1.3))

    assert state.factor == 0.5 and state.calm == 0, "no probing upward into rising latency"
    assert "latency rising" in state.reason


def test_probing_upward_waits_for_a_sustained_healthy_stretch():
    state, factors = AdaptiveState(factor=0.5, baseline=0.05), []
    for _ in range(CONFIG.healthy_windows + 1):
        state = adapt(state, HEALTHY)
        factors.append(round(state.factor, 6))

    assert factors[: CONFIG.healthy_windows - 1] == [0.5] * (CONFIG.healthy_windows - 1), "healthy, but not long yet"
    assert factors[-2:] == [0.5 + CONFIG.increase, 0.5 + 2 * CONFIG.increase], "then a step per healthy window"


def test_recovery_is_slow_and_stops_at_the_configured_rate():
    state = AdaptiveState(factor=0.1, baseline=0.05)
    steps = 0
    while state.factor < 1.0:
        state = adapt(state, HEALTHY)
        steps += 1
        assert state.factor <= 1.0

    assert steps >= 20, "back from 10% to the configured rate takes many healthy windows, not one"
    assert adapt(state, HEALTHY).factor == 1.0, "never above the configured rate"
    assert state.reason == ""


def test_probing_stops_below_the_rate_at_which_the_site_last_broke_until_it_stays_healthy_there():
    broken = adapt(AdaptiveState(factor=0.4, baseline=0.05), Window(requests=20, errors=10, latency=0.05))
    assert broken.factor == pytest.approx(0.4 * 0.5 * CONFIG.ceiling_margin) and broken.ceiling == pytest.approx(0.4)

    state, factors = broken, []
    for _ in range(CONFIG.ceiling_hold - 1):
        state = adapt(state, HEALTHY)
        factors.append(state.factor)
    assert max(factors) == pytest.approx(0.4 * CONFIG.ceiling_margin), "never probes into the breaking point"
    assert "last broke" in state.reason

    for _ in range(20 * CONFIG.ceiling_hold):
        state = adapt(state, HEALTHY)
    assert state.factor == 1.0, "a site that stays healthy below its old limit gets its rate back, slowly"


def test_the_factor_never_drops_below_the_floor():
    state = AdaptiveState()
    for _ in range(50):
        state = adapt(state, Window(requests=10, errors=10, latency=0.0))

    assert state.factor == CONFIG.min_factor


def test_the_baseline_learns_a_lower_latency_at_once_and_a_higher_one_slowly():
    assert adapt(AdaptiveState(baseline=0.2), Window(requests=9, errors=0, latency=0.1)).baseline == 0.1
    assert adapt(AdaptiveState(baseline=0.1), Window(requests=9, errors=0, latency=0.15)).baseline < 0.11


def test_a_few_errors_under_the_threshold_do_not_slow_down():
    state = AdaptiveState(factor=0.5, calm=CONFIG.healthy_windows)
    assert adapt(state, Window(requests=100, errors=2, latency=0.05)).factor > 0.5


def test_a_refused_page_waits_a_window_then_twice_as_long_each_time_within_bounds():
    assert requeue_delay(1, retry_after=None) == CONFIG.window
    assert requeue_delay(3, retry_after=None) == 4 * CONFIG.window
    assert requeue_delay(2, retry_after=30) == 30, "the site's Retry-After when longer"
    assert requeue_delay(20, retry_after=None) == CONFIG.requeue_max_delay


def test_the_state_round_trips_through_redis_text():
    state = AdaptiveState(factor=0.25, baseline=0.031, ceiling=0.5, calm=3, reason="slowed down: 40% errors")

    assert AdaptiveState.from_redis(state.as_redis()) == state
    assert AdaptiveState.from_redis(None) == AdaptiveState()
    old = AdaptiveState.from_redis("0.5 0.05 slowed down: 20% errors in the last window")  # before ceilings
    assert (old.factor, old.baseline, old.reason) == (0.5, 0.05, "slowed down: 20% errors in the last window")


# --- the controller in Redis -----------------------------------------------------------------------


def controller(buckets: TokenBuckets, **knobs) -> AdaptiveController:
    return AdaptiveController(buckets=buckets, config=AdaptiveConfig(**{"window": 0.0, "min_requests": 5, **knobs}))


def test_one_caller_closes_each_window_with_every_workers_responses():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    ctl, client = controller(buckets), get_redis()

    answers = [
        ctl.observe(client, host="example.test", observed=Observed().add(latency=0.1, error=i % 2 == 0))
        for i in range(10)
    ]

    closed = [state for state in answers if state is not None]
    assert len(closed) == 2, "a window closes at its 5th response, then starts again"
    assert closed[0].factor == pytest.approx(0.4 * CONFIG.ceiling_margin), "3 errors of 5: below the 40% that came"
    assert AdaptiveState.from_redis(client.get(buckets.state_key("example.test"))) == closed[-1]


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

    assert states[-1] is not None and states[-1].factor == pytest.approx(0.25), "all refused: a quarter, at once"
    assert client.get(buckets.state_key("unruled.test"))


def test_the_middleware_feeds_responses_and_timeouts_of_every_request():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    crawler = get_crawler()
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
    assert state.factor == pytest.approx(0.5 * CONFIG.ceiling_margin), "2 errors (a 503 and a timeout) of 4 responses"
    assert crawler.stats.get_value("throttle/adaptive_decisions") == 1


def test_the_middleware_adds_a_hosts_responses_to_its_window_together():
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1)
    crawler = get_crawler()
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


# --- where it shows ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_throttle_api_shows_the_effective_rate_and_why(publish):  # noqa: F811
    throttle = publish(throttle_create, domain="slow.example", rate=4, burst=2, scale=0.5)
    state = AdaptiveState(factor=0.25, baseline=0.05, reason="slowed down: 30% errors in the last window")
    get_redis().set(throttle_buckets().state_key("slow.example"), state.as_redis())
    api = client_for("ops", admin=True)

    detail = api.get("/api/throttles/slow.example/").json()
    listed = api.get("/api/throttles/").json()

    assert detail["adaptive"] is True
    assert detail["effective_rate"] == pytest.approx(0.5)  # 4 × 0.5 × 0.25
    assert "30% errors" in detail["adaptive_reason"]
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["effective_rate"] for row in rows if row["domain"] == "slow.example"] == [pytest.approx(0.5)]

    publish(throttle_update, throttle=throttle, adaptive=False)
    detail = api.get("/api/throttles/slow.example/").json()
    assert detail["effective_rate"] == pytest.approx(2.0)
    assert "adaptive off" in detail["adaptive_reason"]


@pytest.mark.django_db
def test_stats_and_metrics_show_slowed_domains(publish):  # noqa: F811
    publish(throttle_create, domain="slow.example", rate=4, burst=2)
    state = AdaptiveState(factor=0.5, baseline=0.05, reason="slowed down: latency 0.30s above 2× baseline 0.05s")
    get_redis().set(throttle_buckets().state_key("slow.example"), state.as_redis())
    api = client_for("ops", admin=True)

    stats = api.get("/api/stats/").json()
    metrics = api.get("/metrics").content.decode()

    [row] = [row for row in stats["throttle"]["adaptive"] if row["domain"] == "slow.example"]
    assert row["effective_rate"] == pytest.approx(2.0) and row["configured_rate"] == 4 and row["cause"] == "latency"
    assert 'trawl_throttle_effective_rate{cause="latency",domain="slow.example"} 2.0' in metrics


@pytest.mark.django_db
def test_the_admin_lists_the_effective_rate_and_why(publish, admin_client):  # noqa: F811
    throttle = publish(throttle_create, domain="slow.example", rate=4, burst=2)
    state = AdaptiveState(factor=0.25, baseline=0.05, reason="slowed down: 30% errors in the last window")
    get_redis().set(throttle_buckets().state_key("slow.example"), state.as_redis())

    listing = admin_client.get(reverse("admin:throttling_domainthrottle_changelist")).content.decode()
    detail = admin_client.get(reverse("admin:throttling_domainthrottle_change", args=[throttle.pk])).content.decode()

    assert "slowed down: 30% errors in the last window" in listing and ">1.0<" in listing
    assert 'name="adaptive"' in detail and "30% errors" in detail
