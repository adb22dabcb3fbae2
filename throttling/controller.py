"""Adaptive politeness, the wiring: every worker's responses feed one controller per domain, in Redis.

Each response (or timeout) is one EVALSHA of `adaptive.lua`, which adds it to the domain's current window atomically.
The call that closes a window (enough time and responses) gets its totals, alone, applies the rule
(throttling/adaptive.py) and stores the new state, which the bucket script reads on every take: the whole cluster
slows down or speeds up together. No Django here, like buckets.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import redis

from throttling.adaptive import AdaptiveConfig, AdaptiveState, Window, adapt
from throttling.buckets import TokenBuckets, registered_domain

SCRIPT = Path(__file__).with_name("adaptive.lua").read_text()
SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
STATE_TTL = 3600  # a domain nobody crawled for an hour starts again at its configured rate
ERROR_STATUSES = frozenset({429, 500, 502, 503, 504, 520, 521, 522, 523, 524})


def is_error(status: int) -> bool:
    return status in ERROR_STATUSES or status >= 500


class AdaptiveController:
    """Feeds responses into the domain's window; applies the rule when a window closes."""

    def __init__(self, *, buckets: TokenBuckets, config: AdaptiveConfig) -> None:
        self.buckets = buckets
        self.config = config
        self.sha = SCRIPT_SHA

    def _call(self, host: str, latency: float | None, error: bool) -> tuple[list[str], list[Any], str, str]:
        host = host.lower().rstrip(".")
        domain = registered_domain(host)
        b, c = self.buckets, self.config
        keys = [b.rule_key(host), b.rule_key(domain), b.window_key(host), b.window_key(domain)]
        args = ["-" if latency is None else f"{latency:.6f}", int(error), c.window, c.min_requests]
        return keys, [*args, int(b.defaults.adaptive)], host, domain

    async def observe_async(
        self, client: Any, *, host: str, latency: float | None, error: bool
    ) -> AdaptiveState | None:
        """Count one response; returns the new state when this call closed a window, else None."""
        keys, args, host, domain = self._call(host, latency, error)
        try:
            reply = await client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.sha = await client.script_load(SCRIPT)
            reply = await client.evalsha(self.sha, len(keys), *keys, *args)
        if not int(reply[0]):
            return None
        key = self.buckets.state_key(host if int(reply[1]) == 1 else domain)
        state = adapt(AdaptiveState.from_redis(await client.get(key)), _window(reply), self.config)
        await client.set(key, state.as_redis(), ex=STATE_TTL)
        return state

    def observe(self, client: redis.Redis, *, host: str, latency: float | None, error: bool) -> AdaptiveState | None:
        """The blocking twin of `observe_async` (benchmarks, tests)."""
        keys, args, host, domain = self._call(host, latency, error)
        try:
            reply = client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.sha = client.script_load(SCRIPT)
            reply = client.evalsha(self.sha, len(keys), *keys, *args)
        if not int(reply[0]):
            return None
        key = self.buckets.state_key(host if int(reply[1]) == 1 else domain)
        state = adapt(AdaptiveState.from_redis(client.get(key)), _window(reply), self.config)
        client.set(key, state.as_redis(), ex=STATE_TTL)
        return state


def _window(reply: list[Any]) -> Window:
    _, _, requests, errors, latency_sum, timed = reply
    timed = int(timed)
    return Window(requests=int(requests), errors=int(errors), latency=float(latency_sum) / timed if timed else 0.0)
