"""Adaptive politeness, the rule: how a domain's rate factor moves after a window of observed responses.

Pure and small on purpose (no Redis, no clock): the controller (throttling/controller.py) gathers one window of every
worker's responses for a domain atomically in Redis and hands it to exactly one caller, which applies this rule and
stores the new state where the bucket script reads it. The factor multiplies the domain's configured rate, so the
configured rate is the ceiling. Multiplicative decrease, cautious additive increase: a site that errors or slows is
relieved at once; a recovered one gets its rate back a step per window, only after a sustained healthy stretch, and
not past the rate at which it last broke until it has stayed healthy just below it for a long while.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

REASON_CHARS = 200  # of a state's reason, for people: longer is not a controller's


@dataclass(frozen=True)
class AdaptiveConfig:
    """Knobs of the rule and of re-queuing refused pages (TRAWL_THROTTLE_ADAPTIVE in settings; defaults here)."""

    window: float = 2.0  # seconds of responses per decision
    min_requests: int = 5  # a window closes only once it holds this many responses
    max_error_share: float = 0.05  # above this share of 5xx / 429 / timeouts: slow down
    # A window with more errors than that closes once this share of `window` passed (and it holds `min_requests`):
    # every request sent at a rate the site refuses is a 503 more, so the first refusals are acted on at once.
    error_window: float = 0.1
    # ...and once it holds this many errors (fewer than `min_requests`): the third 503 is reason enough to slow down.
    min_errors: int = 3
    # Below the share that got through, by this margin: that share was measured partly at the rate before the site
    # broke (its queue still empty), so it overstates what the site takes.
    error_margin: float = 0.6
    # Factor multiplier after an erroring window: at least this cut, deeper when most answers were errors (to just
    # below the share that got through: what the site took), never deeper than its square in one window.
    error_decrease: float = 0.5
    # Latency is distress only when it is both `latency_ratio` × the baseline and `latency_floor` seconds above it:
    # a site answering in milliseconds shows noise (a busy worker, a GC pause) as a large ratio of nothing.
    latency_ratio: float = 1.5
    latency_floor: float = 0.2
    latency_hold_ratio: float = 1.2  # above this (and the floor), latency is rising: no probing upward
    latency_decrease: float = 0.75  # factor multiplier after a slow window
    # Slow windows in a row after which the latency is taken as the site's own, not ours: the rate fell to
    # latency_decrease ** latency_cuts (18 %) and the latency did not. The baseline is learned again from it (one fast
    # window, robots.txt or cached pages, or an hour-old state had set it) and the rate probes upward from there.
    latency_cuts: int = 6
    increase: float = 0.05  # factor added per healthy window once probing upward
    healthy_windows: int = 3  # healthy windows in a row before probing upward
    ceiling_margin: float = 0.8  # probing stops at this share of the factor at which the site last broke
    ceiling_hold: int = 15  # healthy windows at that cap before probing one step higher again
    min_factor: float = 0.02  # never below this share of the configured rate
    baseline_follow: float = 0.1  # how fast the baseline follows a healthy latency above it (0..1)
    # A page the site refused (429, 503, a timeout) goes back to the frontier for a while instead of spending Scrapy's
    # retries at once: a window, doubling per re-queue, at least its Retry-After, at most `requeue_max_delay` seconds;
    # after `requeues` of them it is left to Scrapy's retries (a dead site ends).
    requeues: int = 8
    requeue_max_delay: float = 60.0


@dataclass(frozen=True)
class Window:
    """What every worker saw of a domain during one window."""

    requests: int
    errors: int  # 5xx, 429, timeouts
    latency: float  # mean seconds to the response, over the responses that came


@dataclass(frozen=True)
class AdaptiveState:
    factor: float = 1.0  # effective rate = configured rate × scale × factor
    baseline: float = 0.0  # recent healthy latency, seconds (0: not known yet)
    ceiling: float = 0.0  # the factor at which the site last broke (0: none remembered)
    calm: int = 0  # healthy windows in a row (-1: the last window cut the rate for errors)
    reason: str = ""  # why the factor is below 1, for people
    slow: int = 0  # windows in a row that cut the rate for latency

    def as_redis(self) -> str:
        """The text kept in Redis, "factor baseline ceiling calm slow reason"; buckets.lua reads the factor (first)."""
        numbers = f"{self.factor:.6g} {self.baseline:.6g} {self.ceiling:.6g} {self.calm} {self.slow}"
        return f"{numbers} {self.reason}".rstrip()

    @property
    def cause(self) -> str:
        """The reason in one word, for a metric label: errors | latency | recovering | configured."""
        for word in ("errors", "latency", "recovering"):
            if word in self.reason:
                return word
        return "configured"

    @classmethod
    def from_redis(cls, value: str | bytes | None) -> AdaptiveState:
        """The state kept in Redis; the configured rate's (the default) for a text no controller wrote: crawls write
        these keys, a packaged crawl's child too, and /metrics or a window's close must not fail on one."""
        try:
            state = cls._parsed(value) if value else cls()
        except (ValueError, IndexError, UnicodeDecodeError):
            return cls()
        readable = 0 < state.factor <= 1 and 0 <= state.ceiling < math.inf and 0 <= state.baseline < math.inf
        return replace(state, reason=state.reason[:REASON_CHARS]) if readable else cls()

    @classmethod
    def _parsed(cls, value: str | bytes) -> AdaptiveState:
        if isinstance(value, bytes):
            value = value.decode()
        factor, baseline, *rest = value.split(" ", 4)
        try:
            ceiling, calm = float(rest[0]), int(rest[1])
        except (IndexError, ValueError):  # "factor baseline reason", written before ceilings were remembered
            return cls(float(factor), float(baseline), reason=value.split(" ", 2)[2] if len(rest) else "")
        tail = rest[2] if len(rest) > 2 else ""
        slow, _, reason = tail.partition(" ")
        if not slow.isdecimal():  # "factor baseline ceiling calm reason", written before slow windows were counted
            slow, reason = "0", tail
        return cls(float(factor), float(baseline), ceiling, calm, reason, int(slow))


def adapt(state: AdaptiveState, window: Window, config: AdaptiveConfig = AdaptiveConfig()) -> AdaptiveState:
    """The state after `window`: slower on errors or on latency well above the baseline; held while latency rises;
    else, after `healthy_windows` healthy ones, a step back up (at most 1, and below where the site last broke)."""
    share = window.errors / window.requests if window.requests else 0.0
    if share > config.max_error_share:
        if state.calm < 0:  # the window right after an error cut: its answers are mostly to the rate before the cut
            return replace(state, calm=0)
        cut = min(config.error_decrease, max((1.0 - share) * config.error_margin, config.error_decrease**2))
        return replace(_slowed(state, cut, f"slowed down: {share:.0%} errors in the last window", config), calm=-1)
    baseline, latency = state.baseline, window.latency
    above_floor = bool(baseline) and latency - baseline > config.latency_floor
    if above_floor and latency > baseline * config.latency_ratio:
        if state.slow >= config.latency_cuts:  # the rate fell, the latency did not: it is the site's own
            # Worded without "latency": its cause (metrics, the API) is recovering, not a cut.
            reason = f"recovering: {latency:.2f}s a response stayed as the rate fell, taken as the site's own"
            return replace(state, baseline=latency, ceiling=0.0, calm=0, slow=0, reason=reason)
        reason = f"slowed down: latency {latency:.2f}s above {config.latency_ratio:g}× baseline {baseline:.2f}s"
        return replace(_slowed(state, config.latency_decrease, reason, config), slow=state.slow + 1)
    # A rising latency moves the baseline a quarter as fast: a site that slows a little every window must not drag
    # its baseline along and never look slow against it.
    rising = bool(baseline) and latency > baseline * config.latency_hold_ratio
    baseline = _follow(baseline, latency, config.baseline_follow / (4 if rising else 1))
    if rising and above_floor:
        reason = f"recovering, held: latency rising ({latency:.2f}s, baseline {state.baseline:.2f}s)"
        return replace(state, baseline=baseline, calm=0, slow=0, reason=reason if state.factor < 1 else "")
    return _probed(replace(state, baseline=baseline, calm=state.calm + 1, slow=0), config)


def _slowed(state: AdaptiveState, cut: float, reason: str, config: AdaptiveConfig) -> AdaptiveState:
    """Multiplicative decrease; the factor the window ran at is where the site broke."""
    factor = max(config.min_factor, state.factor * cut)
    return replace(state, factor=factor, ceiling=state.factor, calm=0, slow=0, reason=reason)


def _probed(state: AdaptiveState, config: AdaptiveConfig) -> AdaptiveState:
    """One step up after a sustained healthy stretch, capped just below the remembered breaking point; the memory
    fades one step each `ceiling_hold` healthy windows, so a site that got its capacity back gets its rate back."""
    factor, ceiling = state.factor, state.ceiling
    if state.calm >= config.healthy_windows and factor < 1.0:
        factor = min(1.0, factor + config.increase)
        if ceiling:
            if state.calm % config.ceiling_hold == 0:
                ceiling += config.increase
            if ceiling * config.ceiling_margin >= 1.0:
                ceiling = 0.0  # forgotten: the configured rate is the only cap again
            else:
                factor = max(state.factor, min(factor, ceiling * config.ceiling_margin))
    if factor >= 1.0:
        return replace(state, factor=1.0, ceiling=0.0, reason="")
    reason = f"recovering: {factor:.0%} of the configured rate"
    if ceiling and factor >= ceiling * config.ceiling_margin - 1e-9:
        reason += f", held below the {ceiling:.0%} at which the site last broke"
    return replace(state, factor=factor, ceiling=ceiling, reason=reason)


def requeue_delay(requeues: int, *, retry_after: float | None, config: AdaptiveConfig = AdaptiveConfig()) -> float:
    """Seconds the `requeues`-th re-queue of a refused page waits in the frontier: one window at first (it goes out
    again at the rate the controller chose after seeing the refusal), doubling each time, at least the site's
    Retry-After, at most `requeue_max_delay`."""
    delay = config.window * 2 ** max(0, requeues - 1)
    return min(config.requeue_max_delay, max(delay, retry_after or 0.0))


def _follow(baseline: float, latency: float, weight: float) -> float:
    """A lower latency is the new baseline at once; a higher one moves it only a little, so slowness that creeps up
    window by window still shows against it."""
    if not baseline or latency < baseline:
        return latency
    return baseline + weight * (latency - baseline)
