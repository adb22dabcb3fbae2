"""A short Redis lease: one holder at a time, released or renewed only by its holder, expiring if the holder dies."""

from __future__ import annotations

import uuid

import redis

from project.redis import get_redis, redis_key

# Compare-and-act: only the token that took the lease may extend or drop it (a late holder must not free a new one).
RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class Lease:
    def __init__(self, name: str, *, seconds: float, client: redis.Redis | None = None) -> None:
        self.key = redis_key("lease", name)
        self.ttl_ms = max(1, int(seconds * 1000))
        self.token = uuid.uuid4().hex
        self.client = client or get_redis()

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """Extend the lease; False if it expired and may belong to someone else now."""
        return bool(self.client.eval(RENEW, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> None:
        self.client.eval(RELEASE, 1, self.key, self.token)

    def holder(self) -> str | None:
        return self.client.get(self.key)
