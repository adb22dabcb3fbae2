"""One Redis client per process for Trawl's own keys (cancel flags, leases, buckets)."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import redis
from django.conf import settings

from project.installation import installation_id


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


class LuaScript:
    """A Lua script run with EVALSHA by blocking and asyncio clients alike, loaded once more when Redis lost it (a
    restart, SCRIPT FLUSH). redis-py's `register_script` binds a script to one client; a crawl's throttle calls the
    same script from both kinds."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    def run(self, client: redis.Redis, keys: list[str], args: list[Any]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.sha = client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)

    async def run_async(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.sha = await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)


def redis_key(*parts: object) -> str:
    """The name of one of Trawl's Redis keys: every key Trawl writes is built here, so all share one namespace,
    `trawl:<installation id>:` (project.installation). Celery's broker and result keys are Celery's, not these."""
    return ":".join(("trawl", installation_id(), *(str(part) for part in parts)))


def stats_key(*parts: object) -> str:
    """A key of the ops counters: under TRAWL_STATS_PREFIX when set (tests isolate theirs), else this installation's."""
    prefix = settings.TRAWL_STATS_PREFIX or redis_key("stats")
    return ":".join((prefix, *(str(part) for part in parts)))


def installation_keys_clear() -> int:
    """Delete every Redis key of this installation (`make clean`); other installations' keys stay."""
    client, deleted = get_redis(), 0
    keys = list(client.scan_iter(match=redis_key("*"), count=1000))
    for start in range(0, len(keys), 1000):
        deleted += client.delete(*keys[start : start + 1000])
    return deleted
