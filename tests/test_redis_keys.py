"""Every Lua script call names all its keys in KEYS, and the keys of one call (or one transaction) share a Redis
Cluster slot: a job's carry `{job id}`, a domain's `{registered domain}`."""

from __future__ import annotations

import uuid

import pytest
from redis.crc import key_slot

from crawls.logs.joblog import job_log_sink, job_log_store
from crawls.services.shards import job_frontier
from project.redis import get_redis, hash_tag, redis_client, redis_key
from runtime.frontier import binary_redis, frontier_delete
from throttling.adaptive import AdaptiveConfig
from throttling.buckets import Limits, TokenBuckets
from throttling.controller import AdaptiveController, Observed

pytestmark = pytest.mark.django_db


def slots_of(keys) -> set[int]:
    return {key_slot(key.encode() if isinstance(key, str) else key) for key in keys}


@pytest.fixture
def script_calls(monkeypatch):
    """Every EVALSHA / EVAL this process sends through Trawl's clients: (number of keys, the keys)."""
    calls: list[tuple[int, list]] = []
    for client in (get_redis(), binary_redis()):
        sent = client.execute_command

        def recording(*args, sent=sent, **options):
            if str(args[0]).upper() in ("EVALSHA", "EVAL"):
                count = int(args[2])
                calls.append((count, list(args[3 : 3 + count])))
            return sent(*args, **options)

        monkeypatch.setattr(client, "execute_command", recording)
    return calls


def test_a_frontier_s_script_calls_declare_their_keys_in_one_slot(script_calls):
    job = uuid.uuid4().hex
    first, second = job_frontier(job, shard=0), job_frontier(job, shard=1)
    first.open()
    first.renew()
    second.open(create=False)
    second.renew()
    first.push(b"one", fingerprint=b"f1")
    first.push(b"two", fingerprint=b"f2")
    taken = first.pop(2)
    first.commit(items=[b"{}"], done=taken[:1])
    first.stored(1, progress={"pages": 1})
    second.adopt(10)
    first.release()
    second.try_finish()
    first.try_finish()
    frontier_delete(job_id=job, ttl_seconds=3600)
    scripts = {len(keys) for _, keys in script_calls}
    assert len(script_calls) >= 10 and 0 not in scripts, "a frontier script called without keys"
    for _, keys in script_calls:
        assert slots_of(keys) == slots_of([hash_tag(job)]), keys


def test_the_open_renew_and_finish_calls_name_every_shard_s_keys(script_calls):
    job = uuid.uuid4().hex
    shards = [job_frontier(job, shard=number) for number in range(3)]
    shards[0].open()
    for shard in shards:
        shard.renew()
    script_calls.clear()
    shards[0].try_finish()
    (_, keys), *_ = script_calls
    for number in range(3):
        assert {shards[0].mine(name, f"1:{number}") for name in ("inflight", "wal", "walstored", "adopting")} <= set(
            keys
        )
    frontier_delete(job_id=job, ttl_seconds=3600)


def test_a_take_and_an_observation_touch_only_the_registered_domain_s_slot(script_calls):
    buckets = TokenBuckets(defaults=Limits(rate=100, burst=100, ip_rate=100, ip_burst=100), prefix="trawl:test-slots")
    cluster_keys, _ = buckets._call("shop.example.co.uk", "10.0.0.1", "take", holder="h", cluster=True)
    assert slots_of(cluster_keys) == slots_of([hash_tag("example.co.uk")])
    single_keys, _ = buckets._call("shop.example.co.uk", "10.0.0.1", "take", holder="h")
    assert set(single_keys) - set(cluster_keys) == {buckets.rules_loaded_key}  # a single Redis reads the marker itself
    controller = AdaptiveController(buckets=buckets, config=AdaptiveConfig())
    controller.observe(get_redis(), host="shop.example.co.uk", observed=Observed().add(latency=0.1, error=False))
    (count, keys), *_ = script_calls
    assert count == 4 and slots_of(keys) == slots_of([hash_tag("example.co.uk")])
    assert slots_of([buckets.slots_key("example.co.uk"), buckets.loaded_key("www.example.co.uk")]) == slots_of(keys)


def test_the_rule_mirror_s_bookkeeping_shares_one_slot():
    buckets = TokenBuckets(defaults=Limits(rate=1, burst=1, ip_rate=1, ip_burst=1), prefix=redis_key("throttle"))
    assert len(slots_of([buckets.rules_loaded_key, buckets.rules_index_key, buckets.version_key])) == 1


def test_a_job_log_s_keys_share_the_job_s_slot(settings):
    sink = job_log_sink(job_id="slot-log", attempt=1, shard=2)
    sink.write(["2026-11-26 10:00:00 INFO x hello"])
    keys = list(get_redis().scan_iter(redis_key("joblog", hash_tag("slot-log"), "*")))
    assert len(keys) == 3 and slots_of(keys) == slots_of([hash_tag("slot-log")])
    get_redis().delete(*keys)
    assert job_log_store(job_id="slot-log", attempt=1, shard=2) is None


def test_a_cluster_url_builds_a_cluster_client_and_any_other_a_plain_one():
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
    from redis.exceptions import RedisClusterException

    assert isinstance(redis_client("redis://127.0.0.1:6379/4"), type(get_redis()))
    assert isinstance(redis_client("redis+cluster://127.0.0.1:1/", asyncio=True), AsyncRedisCluster)  # lazy
    with pytest.raises(RedisClusterException):  # the blocking cluster client asks the seed node for its slots at once
        redis_client("redis+cluster://127.0.0.1:1/")
