"""Trawl's Redis: one factory for every client of its state (a plain Redis or a Redis Cluster), the Lua script
runner, and the names of Trawl's keys (each carrying the hash tag that keeps a job's or a domain's keys in one slot)."""

from __future__ import annotations

import asyncio as _asyncio
import contextlib
import functools
import hashlib
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from django.conf import settings
from redis.backoff import NoBackoff
from redis.driver_info import DriverInfo
from redis.retry import Retry

from project.redis.installation import installation_id

# The crawl setting (runtime.settings.compose) that tells a crawl's Scrapy components where Trawl's Redis is: the
# worker's REDIS_URL, or a packaged child's own Redis user.
REDIS_SETTING = "TRAWL_REDIS_URL"
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
# Short timeouts and retries: a Redis blip must slow a crawl down, not hang it. redis-py's pools refuse a 101st
# connection in use ("Too many connections"): a crawl process's crawls, their task, heartbeat, lease and log threads
# and their reactor's commands together may have more under way than that while Redis is slow.
POOL_MAX_CONNECTIONS = 10_000
# What each new connection tells the server (CLIENT SETINFO), given once: left to redis-py, every connection reads the
# package's metadata from disk for its version (0.7 ms; a crawl process's shared client opens a hundred or more).
DRIVER = DriverInfo(lib_version=redis.__version__)
_OPTIONS = {
    "socket_timeout": 5,
    "socket_connect_timeout": 5,
    "max_connections": POOL_MAX_CONNECTIONS,
    "driver_info": DRIVER,
}


def is_cluster_url(url: str) -> bool:
    """`redis+cluster://host:port` (or `rediss+cluster://`) names a Redis Cluster; any other URL a single Redis."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def _cluster_url(url: str) -> str:
    """The URL redis-py's cluster client reads: its plain scheme, no database (a cluster has only database 0)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme=CLUSTER_SCHEMES[parts.scheme], path=""))


def redis_client(url: str | None = None, *, decode: bool = True, asyncio: bool = False, **options: Any) -> Any:
    """A new client of Trawl's state at `url` (default REDIS_URL): `redis.cluster.RedisCluster` (or its asyncio
    twin) for a cluster URL, else `redis.Redis`. Every client of Trawl's keys is built here. The caller owns it."""
    url = url or settings.REDIS_URL
    options = {**_OPTIONS, "decode_responses": decode, **options}
    if is_cluster_url(url):
        options.pop("health_check_interval", None)
        cluster = redis.asyncio.cluster.RedisCluster if asyncio else redis.cluster.RedisCluster
        return cluster.from_url(_cluster_url(url), **options)
    return (redis.asyncio.Redis if asyncio else redis.Redis).from_url(url, **options)


# Each event loop's shared asyncio clients, by (url, decode): see loop_redis. Its pool keeps the connections it opened
# for as long as the loop runs: at most LOOP_CONNECTIONS, a command past them waits for a free one.
LOOP_CONNECTIONS = 200
LOOP_CONNECTION_WAIT_SECONDS = 20.0
_loop_clients: weakref.WeakKeyDictionary[Any, dict[tuple[str, bool], Any]] = weakref.WeakKeyDictionary()


def loop_redis(url: str | None = None, *, decode: bool = True) -> Any:
    """The asyncio client of Trawl's state at `url` that every caller on the running event loop shares: a crawl
    process's reactor runs up to TRAWL_CRAWLS_PER_PROCESS crawls, and a client of each of their components (throttle,
    frontier, robots.txt, cache) would open and close its own connections with every crawl. One pool per loop keeps
    its connections from one crawl to the next. Callers never close it; it lives as long as its loop."""
    loop = _asyncio.get_running_loop()
    if loop not in _loop_clients:  # a new loop: forget the ended ones (tests' loops), not on every call of a crawl
        for stale in [other for other in _loop_clients if other.is_closed()]:
            del _loop_clients[stale]
    clients = _loop_clients.setdefault(loop, {})
    key = (url or settings.REDIS_URL, decode)
    if key not in clients:
        clients[key] = _loop_client(key[0], decode=decode)
    return clients[key]


class _SharedCluster(redis.asyncio.cluster.RedisCluster):
    """redis-py's asyncio cluster client, for many tasks at once, whose lost connections read as lost connections
    (a redis.RedisError, which Trawl's components handle as Redis away). After a lost connection redis-py disconnects
    the idle ones in the background; one that another task took meanwhile loses its socket under that task's command,
    raising AttributeError (its reader or writer is None). A command is retried at once on the same node (nothing of
    it reached the socket; the node is up, so none of redis-py's own handling of a lost node runs); a pipeline's
    execute raises ConnectionError. And a client that reached no node at its start raises RedisClusterException, not
    a RedisError."""

    async def initialize(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().initialize(*args, **kwargs)
        except redis.exceptions.RedisClusterException as error:
            cause = error.__cause__
            if not (isinstance(cause, redis.ConnectionError | redis.TimeoutError | OSError) or _socket_gone(cause)):
                raise
            raise redis.ConnectionError(str(error)) from error

    async def _execute_command(self, target_node: Any, *args: Any, **kwargs: Any) -> Any:
        with _socket_gone_as_lost(f"connection to {target_node.name} closed under a command"):
            return await super()._execute_command(target_node, *args, **kwargs)

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        if shard_hint:
            raise redis.exceptions.RedisClusterException("shard_hint is deprecated in cluster mode")
        return _SharedClusterPipeline(self, transaction)


class _SharedClusterPipeline(redis.asyncio.cluster.ClusterPipeline):
    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        with _socket_gone_as_lost("a connection closed under a pipeline"):
            return await super().execute(*args, **kwargs)


@contextlib.contextmanager
def _socket_gone_as_lost(message: str) -> Iterator[None]:
    """The AttributeError of a connection closed under the block raised as the ConnectionError it is."""
    try:
        yield
    except AttributeError as error:
        if not _socket_gone(error):
            raise
        raise redis.ConnectionError(message) from error


def _socket_gone(error: BaseException | None) -> bool:
    """An attribute of None looked up in redis-py's asyncio connection: its reader or writer, closed under it."""
    if not isinstance(error, AttributeError) or error.obj is not None or error.__traceback__ is None:
        return False
    innermost = error.__traceback__
    while innermost.tb_next is not None:
        innermost = innermost.tb_next
    return Path(innermost.tb_frame.f_code.co_filename).match("redis/asyncio/connection.py")


def _loop_client(url: str, *, decode: bool) -> Any:
    if is_cluster_url(url):  # a pool per node, each bounded by POOL_MAX_CONNECTIONS
        return _SharedCluster.from_url(_cluster_url(url), **_OPTIONS, decode_responses=decode)
    options = {**_OPTIONS, "decode_responses": decode, "max_connections": LOOP_CONNECTIONS}
    pool = redis.asyncio.BlockingConnectionPool.from_url(url, timeout=LOOP_CONNECTION_WAIT_SECONDS, **options)
    return redis.asyncio.Redis.from_pool(pool)


async def loop_redis_close() -> None:
    """Close the running loop's shared clients (a loop about to end: a test's `asyncio.run`)."""
    for client in _loop_clients.pop(_asyncio.get_running_loop(), {}).values():
        await client.aclose()


@functools.cache
def get_redis() -> redis.Redis:
    """This process's client of Trawl's state, replies decoded."""
    return redis_client(health_check_interval=30, retry_on_timeout=True)


PROBE_TIMEOUT_SECONDS = 1.0


def redis_answers(url: str | None = None, timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """True when a Redis (or, for a `redis+cluster://` URL, a Redis Cluster) answers a PING at `url` (default
    REDIS_URL). A try ends within two `timeout`s: a connection the server dropped (it restarted) is opened again once,
    never more."""
    try:
        return bool(_probe(url or settings.REDIS_URL, timeout).ping())
    except (redis.RedisError, redis.exceptions.RedisClusterException, OSError):
        return False


@functools.lru_cache(maxsize=8)
def _probe(url: str, timeout: float) -> Any:
    # Kept, so a probe costs one round trip; a cluster's client fails at its creation when no node answers, and is
    # not kept then.
    return redis_client(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 1))


def redis_awaited(*, patience: float, given_up: Callable[[], bool] = lambda: False) -> bool:
    """True once Trawl's Redis answers (redis_answers), trying for up to `patience` seconds (0: once), pausing up to
    2 s between tries, unless `given_up()` says stop first. Each try is bounded, so the patience bounds the wait."""
    deadline, pause = time.monotonic() + patience, 0.25
    while not redis_answers():
        if time.monotonic() + pause > deadline or given_up():
            return False
        time.sleep(pause)
        pause = min(pause * 2, 2.0)
    return True


def on_cluster(client: Any) -> bool:
    return isinstance(client, redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster)


def mget_across_slots(client: Any, keys: list[str]) -> list[Any]:
    """MGET of keys that may live in different cluster slots (not atomic on a cluster: for reports, not decisions)."""
    return client.mget_nonatomic(keys) if on_cluster(client) else client.mget(keys)


def hash_tag(value: object) -> str:
    """`{value}`: keys whose names carry the same tag live in one Redis Cluster slot, so one script or one multi-key
    command may touch them all (a job's keys carry its id, a domain's throttle keys its registered domain)."""
    return "{" + str(value) + "}"


class LuaScript:
    """A Lua script run with EVALSHA by blocking and asyncio clients alike, loaded once more when Redis lost it (a
    restart, SCRIPT FLUSH). redis-py's `register_script` binds a script to one client; a crawl's throttle calls the
    same script from both kinds."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    def run(self, client: redis.Redis, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.sha = client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)

    async def run_async(self, client: Any, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.sha = await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)


def redis_key(*parts: object) -> str:
    """The name of one of Trawl's Redis keys: every key Trawl writes is built here, so all share one namespace,
    `trawl:<installation id>:` (project.redis.installation). Celery's broker and result keys are Celery's, not these."""
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
