"""The asyncio Redis client every crawl on an event loop shares (project.redis.loop_redis): one per loop and URL,
never closed by its users, and able to hold more commands at once than redis-py's default pool of 100 connections
(a crawl process's crawls together have that many under way)."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from django.conf import settings

from project.redis import LOOP_CONNECTIONS, get_redis, loop_redis, loop_redis_close, redis_client, redis_key

pytestmark = pytest.mark.django_db


def test_the_crawls_of_a_loop_share_one_client_and_another_loop_gets_its_own():
    async def clients():
        try:
            return loop_redis(), loop_redis(settings.REDIS_URL), loop_redis(decode=False)
        finally:
            await loop_redis_close()

    first, again, binary = asyncio.run(clients())
    assert first is again and binary is not first
    other, _, _ = asyncio.run(clients())
    assert other is not first, "redis.asyncio connections belong to the loop that opened them"


def test_three_hundred_commands_at_once_on_the_shared_client_all_run_on_at_most_its_connections():
    """Each BLPOP holds its connection for 0.3 s: of 300 at once, those past LOOP_CONNECTIONS wait for a free one
    (redis-py's default pool would refuse them), and the pool keeps no more than that many open."""
    key = redis_key("test", "loop-redis", uuid.uuid4().hex)

    async def many():
        try:
            client = loop_redis()
            answers = await asyncio.gather(*(client.blpop([key], timeout=0.3) for _ in range(300)))
            pool = client.connection_pool
            return answers, len(pool._available_connections) + len(pool._in_use_connections)
        finally:
            await loop_redis_close()

    answers, connections = asyncio.run(many())
    assert answers == [None] * 300
    assert connections == LOOP_CONNECTIONS


def test_three_hundred_threads_blocked_on_the_process_client_all_get_a_connection():
    """The process's blocking client (get_redis) serves every crawl thread of a crawl host at once."""
    key, answers = redis_key("test", "loop-redis", uuid.uuid4().hex), []
    threads = [
        threading.Thread(target=lambda: answers.append(get_redis().blpop([key], timeout=0.3))) for _ in range(300)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [None] * 300


def test_a_new_connection_names_its_library_without_reading_package_metadata(monkeypatch):
    """redis-py left alone reads its package's metadata from disk for every connection it opens (the version it sends
    in CLIENT SETINFO): 0.7 ms each, a hundred or more in a crawl process. Trawl's clients give it once."""
    import redis.utils

    def metadata_read():
        raise AssertionError("a connection read redis-py's package metadata")

    monkeypatch.setattr(redis.utils, "get_lib_version", metadata_read)

    async def pings() -> list:
        try:
            client = loop_redis()
            return await asyncio.gather(*(client.ping() for _ in range(5)))  # five connections opened at once
        finally:
            await loop_redis_close()

    assert asyncio.run(pings()) == [True] * 5
    assert redis_client().ping()
