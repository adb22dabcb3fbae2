"""Adaptive politeness: the rule (pure), window by window, and the delay of a refused page."""

from __future__ import annotations

import pytest

from tests.throttling.adaptive_helpers import CONFIG, HEALTHY, clean_keys  # noqa: F401 (an autouse fixture)
from throttling.adaptive import AdaptiveState, Window, adapt, requeue_delay


def test_errors_cut_the_rate_at_least_in_half_and_say_why():
    state = adapt(AdaptiveState(factor=1.0, baseline=0.05), Window(requests=20, errors=4, latency=0.05))

    # At least in half, and below the 80 % that got through (a share measured partly before the site broke).
    assert state.factor == pytest.approx(min(CONFIG.error_decrease, 0.8 * CONFIG.error_margin))
    assert state.factor <= 0.5
    assert "20% errors" in state.reason


def test_mostly_refused_windows_cut_to_what_got_through_but_never_below_a_quarter_at_once():
    through = 0.5 * CONFIG.error_margin  # below the 50% that got through
    assert adapt(AdaptiveState(), Window(requests=20, errors=10, latency=0.05)).factor == pytest.approx(through)
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
    assert broken.factor == pytest.approx(0.4 * 0.5 * CONFIG.error_margin) and broken.ceiling == pytest.approx(0.4)

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


def test_a_latency_the_rate_does_not_move_is_the_site_s_own_and_the_rate_comes_back():
    """One fast window (robots.txt, cached pages, an hour-old state) set a baseline the site's pages never come near:
    cutting for latency that does not fall as the rate does would hold the domain at the floor for good."""
    state, cuts = AdaptiveState(baseline=0.002), 0
    for _ in range(CONFIG.latency_cuts + 1):
        after = adapt(state, Window(requests=20, errors=0, latency=0.21))
        cuts += after.factor < state.factor
        state = after

    assert cuts == CONFIG.latency_cuts and state.factor == pytest.approx(CONFIG.latency_decrease**CONFIG.latency_cuts)
    assert state.baseline == 0.21 and "site's own" in state.reason and state.cause == "recovering", state
    windows = 0
    while state.factor < 1.0:
        state = adapt(state, Window(requests=20, errors=0, latency=0.21))
        windows += 1
    assert windows <= CONFIG.healthy_windows + 1 / CONFIG.increase, "probing upward from there, not held below"


def test_latency_that_falls_as_the_rate_does_keeps_its_baseline():
    """A window back at the baseline between cuts: the rate does move the latency, so it is ours to bring down."""
    state, slow = AdaptiveState(baseline=0.5), [0.9, 0.85, 0.9, 0.8, 0.9]
    assert len(slow) < CONFIG.latency_cuts
    for latency in (*slow, 0.5, *slow):
        state = adapt(state, Window(requests=20, errors=0, latency=latency))

    assert state.baseline == 0.5 and state.slow == len(slow)
    assert state.factor == pytest.approx(CONFIG.latency_decrease ** (2 * len(slow)))


def test_the_state_round_trips_through_redis_text():
    state = AdaptiveState(factor=0.25, baseline=0.031, ceiling=0.5, calm=3, reason="slowed down: 40% errors", slow=2)

    assert AdaptiveState.from_redis(state.as_redis()) == state
    assert AdaptiveState.from_redis(None) == AdaptiveState()
    before_slow = AdaptiveState.from_redis("0.25 0.031 0.5 3 slowed down: 40% errors")
    assert before_slow == AdaptiveState(
        factor=0.25, baseline=0.031, ceiling=0.5, calm=3, reason="slowed down: 40% errors"
    )
    assert AdaptiveState.from_redis("0.25 0.031 0.5 -1") == AdaptiveState(0.25, 0.031, 0.5, -1)
    # A digit int() does not read (str.isdigit says yes to "²") is the older format's reason, not a count.
    assert AdaptiveState.from_redis("0.25 0.031 0.5 3 ² held").reason == "² held"
    old = AdaptiveState.from_redis("0.5 0.05 slowed down: 20% errors in the last window")  # before ceilings
    assert (old.factor, old.baseline, old.reason) == (0.5, 0.05, "slowed down: 20% errors in the last window")
