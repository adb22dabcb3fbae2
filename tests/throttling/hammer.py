"""A process that asks the bucket script for tokens as fast as it can. Imported by spawned children: no Django."""

from __future__ import annotations

import random
import time

from project.redis import redis_client
from throttling.buckets import GRANTED, Limits, TokenBuckets


def hammer(
    redis_url: str, prefix: str, host: str, egress: str, start_at: float, stop_at: float
) -> list[tuple[float, float]]:
    """Take tokens from `start_at` to `stop_at` (unix time); return (asked at, answered at) of every grant.

    A refused process sleeps a random fraction of a short wait, so the processes interleave every which way.
    """
    client = redis_client(redis_url)
    buckets = TokenBuckets(defaults=Limits(rate=1, burst=1, ip_rate=1, ip_burst=1), prefix=prefix)
    rng = random.Random()
    grants = []
    time.sleep(max(0.0, start_at - time.time()))
    while time.time() < stop_at:
        asked = time.time()
        decision = buckets.take(client, host=host, egress=egress)
        if decision.status == GRANTED:
            grants.append((asked, time.time()))
        elif rng.random() < 0.5:
            time.sleep(rng.uniform(0, min(decision.wait, 0.01)))
    client.close()
    return grants
