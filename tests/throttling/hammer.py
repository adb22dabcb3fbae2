"""A process that asks the bucket script for tokens as fast as it can. Imported by spawned children: no Django."""

from __future__ import annotations

import random
import time

from project.redis import redis_client
from throttling.buckets import GRANTED, Limits, TokenBuckets

_all_ready = None  # the pool's barrier, set in each child by `hammer_init`


def hammer_init(all_ready) -> None:
    """Pool initializer: keep the barrier every child waits at before it starts asking."""
    global _all_ready
    _all_ready = all_ready


def hammer(redis_url: str, prefix: str, host: str, egress: str, seconds: float) -> list[tuple[float, float]]:
    """Take tokens for `seconds` from when every child of the pool is connected; return (asked at, answered at) of
    every grant. Children start at once whatever the time their spawn took (seconds on a loaded machine).

    A refused process sleeps a random fraction of a short wait, so the processes interleave every which way.
    """
    client = redis_client(redis_url)
    client.ping()
    buckets = TokenBuckets(defaults=Limits(rate=1, burst=1, ip_rate=1, ip_burst=1), prefix=prefix)
    rng = random.Random()
    grants = []
    _all_ready.wait()
    stop_at = time.time() + seconds
    while time.time() < stop_at:
        asked = time.time()
        decision = buckets.take(client, host=host, egress=egress)
        if decision.status == GRANTED:
            grants.append((asked, time.time()))
        elif rng.random() < 0.5:
            time.sleep(rng.uniform(0, min(decision.wait, 0.01)))
    client.close()
    return grants
