"""The most slowed domains, for /metrics and /api/stats/: read from the controller's index
(buckets.adaptive_index_key), a few at a time, never by walking every domain's state. A domain whose state expired
(nobody crawled it for STATE_TTL) while it was indexed is dropped from the index when it comes up."""

from __future__ import annotations

from typing import Any

import redis

from project.redis import get_redis, mget_across_slots
from throttling.adaptive import AdaptiveState
from throttling.models import DomainThrottle
from throttling.services import default_limits, throttle_buckets, throttle_limits


def throttle_slowed_top(*, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The `limit` most slowed domains (lowest factor first) with their effective and configured rates and cause,
    and how many domains the controller holds below their configured rate in all ([], 0 when Redis is away)."""
    client, buckets = get_redis(), throttle_buckets()
    index = buckets.adaptive_index_key()
    try:
        names = [_text(name) for name in client.zrange(index, 0, max(0, limit - 1))] if limit > 0 else []
        values = mget_across_slots(client, [buckets.state_key(name) for name in names]) if names else []
        expired = [name for name, value in zip(names, values, strict=True) if not value]
        if expired:
            client.zrem(index, *expired)
        held = client.zcard(index)
    except redis.RedisError:
        return [], 0
    live = {name: value for name, value in zip(names, values, strict=True) if value}
    rules = {row.domain: row for row in DomainThrottle.objects.filter(domain__in=list(live))}
    rows = []
    for name, value in live.items():
        state, rule = AdaptiveState.from_redis(value), rules.get(name)
        if rule is not None and not rule.adaptive:
            continue
        limits = throttle_limits(rule) if rule is not None else default_limits()
        configured = limits.rate * limits.scale
        rows.append(
            {
                "domain": name,
                "rule": rule is not None,
                "configured_rate": round(configured, 4),
                "effective_rate": round(configured * state.factor, 4),
                "factor": round(state.factor, 4),
                "cause": state.cause,
                "reason": state.reason or "at the configured rate",
            }
        )
    return rows, held


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
