"""Adaptive politeness, the rule: how a domain's rate factor moves after a window of observed responses.

Pure and small on purpose (no Redis, no clock): the controller (throttling/controller.py) gathers one window of every
worker's responses for a domain atomically in Redis and hands it to exactly one caller, which applies this rule and
stores the new state where the bucket script reads it. The factor multiplies the domain's configured rate, so the
configured rate is the ceiling. Additive increase, multiplicative decrease, as TCP does: a site that errors or slows
is relieved at once; a recovered one gets its rate back a step per window.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class AdaptiveConfig:
    """Knobs of the rule (TRAWL_THROTTLE_ADAPTIVE in settings; defaults here)."""

    window: float = 2.0  # seconds of responses per decision
    min_requests: int = 5  # a window closes only once it holds this many responses
    max_error_share: float = 0.05  # above this share of 5xx / 429 / timeouts: slow down
    error_decrease: float = 0.5  # factor multiplier after an erroring window
    latency_ratio: float = 2.0  # mean latency above baseline × this: slow down
    latency_decrease: float = 0.75  # factor multiplier after a slow window
    increase: float = 0.05  # factor added after a healthy window (slow recovery)
    min_factor: float = 0.02  # never below this share of the configured rate
    baseline_follow: float = 0.1  # how fast the baseline follows a healthy latency above it (0..1)


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
    reason: str = ""  # why the factor is below 1, for people

    def as_redis(self) -> str:
        return f"{self.factor:.6g} {self.baseline:.6g} {self.reason}".rstrip()

    @property
    def cause(self) -> str:
        """The reason in one word, for a metric label: errors | latency | recovering | configured."""
        for word in ("errors", "latency", "recovering"):
            if word in self.reason:
                return word
        return "configured"

    @classmethod
    def from_redis(cls, value: str | bytes | None) -> AdaptiveState:
        if not value:
            return cls()
        if isinstance(value, bytes):
            value = value.decode()
        factor, baseline, *reason = value.split(" ", 2)
        return cls(float(factor), float(baseline), reason[0] if reason else "")


def adapt(state: AdaptiveState, window: Window, config: AdaptiveConfig = AdaptiveConfig()) -> AdaptiveState:
    """The state after `window`: slower on errors or latency above the baseline, else a step back up (at most 1)."""
    share = window.errors / window.requests if window.requests else 0.0
    if share > config.max_error_share:
        factor = max(config.min_factor, state.factor * config.error_decrease)
        return replace(state, factor=factor, reason=f"slowed down: {share:.0%} errors in the last window")
    if state.baseline and window.latency > state.baseline * config.latency_ratio:
        factor = max(config.min_factor, state.factor * config.latency_decrease)
        reason = f"slowed down: latency {window.latency:.2f}s above {config.latency_ratio:g}× baseline"
        return replace(state, factor=factor, reason=f"{reason} {state.baseline:.2f}s")
    baseline = _follow(state.baseline, window.latency, config.baseline_follow)
    factor = min(1.0, state.factor + config.increase)
    reason = "" if factor >= 1.0 else f"recovering: {factor:.0%} of the configured rate"
    return AdaptiveState(factor=factor, baseline=baseline, reason=reason)


def _follow(baseline: float, latency: float, weight: float) -> float:
    """A lower latency is the new baseline at once; a higher one moves it only a little, so slowness that creeps up
    window by window still shows against it."""
    if not baseline or latency < baseline:
        return latency
    return baseline + weight * (latency - baseline)
