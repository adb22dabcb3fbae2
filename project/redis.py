"""One Redis client per process for Trawl's own keys (cancel flags, leases, buckets)."""

from __future__ import annotations

import functools

import redis
from django.conf import settings


@functools.cache
def get_redis() -> redis.Redis:
    # Short timeouts and retries: a Redis blip must slow a crawl down, not hang it.
    return redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=5,
        socket_connect_timeout=5,
        health_check_interval=30,
        retry_on_timeout=True,
        decode_responses=True,
    )


def redis_key(*parts: object) -> str:
    """The name of one of Trawl's Redis keys: every key Trawl writes is built here, so all share one namespace."""
    return ":".join(("trawl", *(str(part) for part in parts)))
