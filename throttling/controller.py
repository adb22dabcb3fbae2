"""Adaptive politeness, the wiring: every worker's responses feed one controller per domain, in Redis.

A worker gathers what it saw of a host for a moment (`Observed`, throttling/middlewares.py) and adds it to the
domain's current window atomically with one EVALSHA of `adaptive.lua`: one call per host every OBSERVE_SECONDS, not
one per response. The call that closes a window (enough time and responses) gets its totals, alone, applies the rule
(throttling/adaptive.py) and stores the new state, which the bucket script reads on every take: the whole cluster
slows down or speeds up together. No Django here, like buckets.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from project.redis import LuaScript
from throttling.adaptive import AdaptiveConfig, AdaptiveState, Window, adapt, requeue_delay
from throttling.buckets import Limits, TokenBuckets, registered_domain

logger = logging.getLogger("trawl.throttle")
SCRIPT = Path(__file__).with_name("adaptive.lua").read_text()
# How long a host's responses gather in a worker before one call adds them to its window (whose decisions come every
# few seconds): a fast crawl pays one Redis call per host per interval, not one per response.
OBSERVE_SECONDS = 0.25
STATE_TTL = 3600  # a domain nobody crawled for an hour starts again at its configured rate
ERROR_STATUSES = frozenset({429, 500, 502, 503, 504, 520, 521, 522, 523, 524})


def is_error(status: int) -> bool:
    return status in ERROR_STATUSES or status >= 500


@dataclass
class Observed:
    """Responses (and timeouts) of one host a worker saw and has not added to the host's window yet."""

    requests: int = 0
    errors: int = 0
    latency_sum: float = 0.0
    timed: int = 0  # responses with a latency: a timeout has none

    def add(self, *, latency: float | None, error: bool) -> Observed:
        self.requests += 1
        self.errors += int(error)
        if latency is not None:
            self.latency_sum += latency
            self.timed += 1
        return self


class AdaptiveController:
    """Feeds responses into the domain's window; applies the rule when a window closes."""

    def __init__(self, *, buckets: TokenBuckets, config: AdaptiveConfig) -> None:
        self.buckets = buckets
        self.config = config
        self.script = LuaScript(SCRIPT)

    def _call(self, host: str, observed: Observed) -> tuple[list[str], list[Any], str, str]:
        host = host.lower().rstrip(".")
        domain = registered_domain(host)
        b, c, o = self.buckets, self.config, observed
        keys = [b.rule_key(host), b.rule_key(domain), b.window_key(host), b.window_key(domain)]
        args = [o.requests, o.errors, f"{o.latency_sum:.6f}", o.timed, c.window, c.min_requests]
        extra = [int(b.defaults.adaptive), c.max_error_share, c.error_window, c.min_errors]
        return keys, [*args, *extra], host, domain

    async def observe_async(self, client: Any, *, host: str, observed: Observed) -> AdaptiveState | None:
        """Add what was observed to the host's window; returns the new state when this call closed it, else None."""
        keys, args, host, domain = self._call(host, observed)
        reply = await self.script.run_async(client, keys, args)
        if not int(reply[0]):
            return None
        name = host if int(reply[1]) == 1 else domain
        key = self.buckets.state_key(name)
        state = adapt(AdaptiveState.from_redis(await client.get(key)), _window(reply), self.config)
        await client.set(key, state.as_redis(), ex=STATE_TTL)
        if state.factor < 1:
            await client.zadd(self.buckets.adaptive_index_key(), {name: state.factor})
        else:
            await client.zrem(self.buckets.adaptive_index_key(), name)
        return state

    async def feed_async(self, client: Any, *, host: str, observed: Observed, stats: Any) -> None:
        """Feed a host's outcomes to its domain's controller, counting decisions in the crawl's stats and logging
        those below full rate. Redis away: the crawl goes on at the rate it had."""
        try:
            state = await self.observe_async(client, host=host, observed=observed)
        except redis.RedisError as exc:
            stats.inc_value("throttle/adaptive_errors")
            logger.warning("throttle: adaptive controller unavailable (%s)", exc)
            return
        if state is not None:
            stats.inc_value("throttle/adaptive_decisions")
            stats.min_value("throttle/adaptive_min_factor", round(state.factor, 3))
            if state.reason:
                logger.info("throttle: %s at %.0f%% of its rate: %s", host, state.factor * 100, state.reason)

    def observe(self, client: redis.Redis, *, host: str, observed: Observed) -> AdaptiveState | None:
        """The blocking twin of `observe_async` (benchmarks, tests)."""
        keys, args, host, domain = self._call(host, observed)
        reply = self.script.run(client, keys, args)
        if not int(reply[0]):
            return None
        name = host if int(reply[1]) == 1 else domain
        state = adapt(AdaptiveState.from_redis(client.get(self.buckets.state_key(name))), _window(reply), self.config)
        adaptive_state_store(client, buckets=self.buckets, name=name, state=state)
        return state

    async def requeue_delay_async(
        self, client: Any, *, host: str, requeues: int, retry_after: float | None
    ) -> float | None:
        """Seconds a refused request of `host` waits in the frontier before its `requeues`-th try, or None when the
        rule that governs the host is not adaptive (its owner chose the configured rate whatever happens: Scrapy's
        retries apply as they would without Trawl) or the page was re-queued `config.requeues` times already."""
        if requeues > self.config.requeues:
            return None
        host = host.lower().rstrip(".")
        rules = await client.mget(self.buckets.rule_key(host), self.buckets.rule_key(registered_domain(host)))
        rule = next((Limits.from_redis(value) for value in rules if value), self.buckets.defaults)
        if not rule.adaptive:
            return None
        return requeue_delay(requeues, retry_after=retry_after, config=self.config)


def adaptive_state_store(client: redis.Redis, *, buckets: TokenBuckets, name: str, state: AdaptiveState) -> None:
    """Keep a domain's state (for STATE_TTL) and its place in the index of slowed domains (buckets.adaptive_index_key):
    a domain back at its configured rate leaves the index."""
    client.set(buckets.state_key(name), state.as_redis(), ex=STATE_TTL)
    if state.factor < 1:
        client.zadd(buckets.adaptive_index_key(), {name: state.factor})
    else:
        client.zrem(buckets.adaptive_index_key(), name)


def _window(reply: list[Any]) -> Window:
    _, _, requests, errors, latency_sum, timed = reply
    timed = int(timed)
    return Window(requests=int(requests), errors=int(errors), latency=float(latency_sum) / timed if timed else 0.0)
