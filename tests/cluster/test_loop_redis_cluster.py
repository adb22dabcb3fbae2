"""The asyncio client every crawl of a process shares (project.redis.loop_redis), on a Redis Cluster. When redis-py's
cluster client loses a connection it disconnects its idle ones in the background; one that another task took meanwhile
loses its socket under that task's command, and redis-py raises AttributeError. With a process's crawls sharing the
client, that must read as what it is, a lost connection (a redis.RedisError Trawl's components handle, retried
first); so must a new client's start that reached no node (redis-py's RedisClusterException)."""

from __future__ import annotations

import asyncio
import collections
import uuid

import pytest
import redis
import redis.cluster
from django.conf import settings

from project.redis import hash_tag, loop_redis, loop_redis_close, redis_key
from tests.redis_cluster import on_redis_cluster

pytestmark = pytest.mark.django_db
__all__ = ["on_redis_cluster"]

COMMANDS_AT_ONCE = 240  # six crawls' middlewares with 40 requests each, as tests/throttling/test_slots.py sends
ROUNDS = 40  # without the fix, about one round in ten raised AttributeError here


def test_connections_killed_under_many_commands_at_once_fail_only_as_lost_connections():
    key = redis_key("test", "loop-cluster", hash_tag(uuid.uuid4().hex))  # one slot: MGET of both keys
    failures: collections.Counter[type] = collections.Counter()

    with redis.cluster.RedisCluster.from_url(settings.REDIS_URL.replace("redis+cluster", "redis")) as cluster:
        primaries = [(node.host, node.port) for node in cluster.get_primaries()]

    async def one_round(kill_after: float) -> None:
        client = loop_redis()  # new on each round's loop: its first commands initialize it while the kill lands
        try:

            async def command(n: int) -> None:
                await asyncio.sleep(0.0005 * (n % 20))
                try:
                    await client.mget(f"{key}:a", f"{key}:b")
                except Exception as error:  # every kind is counted, and asserted on below
                    failures[type(error)] += 1

            async def kill_every_connection() -> None:
                await asyncio.sleep(kill_after)
                for host, port in primaries:
                    with redis.Redis(host=host, port=port) as node:
                        node.client_kill_filter(_type="normal", skipme=True)

            await asyncio.gather(*(command(n) for n in range(COMMANDS_AT_ONCE)), kill_every_connection())
        finally:
            await loop_redis_close()

    for n in range(ROUNDS):
        asyncio.run(one_round(kill_after=0.001 * (n % 10)))
    assert failures, "the kills landed between commands every time: nothing was tested"
    assert all(issubclass(kind, redis.RedisError) for kind in failures), failures
