"""bench/throttle.py's cost measurements: a token take against a PING, the controller's and the slots' cost per request.

Each alternates its calls in short rounds so a busy machine slows both sides alike (bench/throttle.py says what).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import redis
from _common import exit_on_sigterm  # noqa: F401 - puts the repository on sys.path

from project.redis import LuaScript, redis_client
from throttling.adaptive import AdaptiveConfig
from throttling.buckets import Limits, TokenBuckets
from throttling.controller import OBSERVE_SECONDS, AdaptiveController, Observed
from throttling.slots import SCRIPT as SLOTS_SCRIPT

PREFIX = "trawl:bench-throttle"
HOST = "bench.example.com"
WIDTH = 16  # requests of one crawl process waiting for the same buckets at once (CONCURRENT_REQUESTS is 16)
NEVER_DRY = Limits(rate=1e9, burst=10**9, ip_rate=1e9, ip_burst=10**9)


def buckets_with(client: redis.Redis, limits: Limits) -> TokenBuckets:
    """Fresh buckets under the bench prefix, with one rule for HOST's domain, mirrored as Trawl's services do."""
    for key in client.scan_iter(f"{PREFIX}:*", count=1000):
        client.delete(key)
    buckets = TokenBuckets(defaults=limits, prefix=PREFIX)
    client.set(buckets.rule_key("example.com"), limits.as_redis())
    client.set(buckets.rules_loaded_key, "1", ex=3600)
    return buckets


def count_for(call, seconds: float) -> int:
    count, stop_at = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        call()
        count += 1
    return count


async def count_for_async(call, seconds: float) -> int:
    count, stop_at = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        await call()
        count += 1
    return count


def cost(url: str, seconds: float, rounds: int = 6) -> dict[str, float]:
    """Calls per second, PING and take alternating in short rounds so a busy machine slows both alike."""
    client = redis_client(url)
    buckets = buckets_with(client, NEVER_DRY)
    buckets.take(client, host=HOST, egress="bench")  # loads the script
    # The same call with a script that does nothing: what any one-script take costs before its first line runs
    # (EVALSHA's own work in Redis, packing 11 keys and 7 arguments, reading a reply), the most a take could reach.
    keys, args = buckets._call(HOST, "bench", "take")
    empty = LuaScript("return {1, 0, 3, 1}")
    empty.run(client, keys, args)  # loads it
    slot = seconds / rounds
    ping = take = bare = 0
    for _ in range(rounds):
        ping += count_for(client.ping, slot)
        take += count_for(lambda: buckets.take(client, host=HOST, egress="bench"), slot)
        bare += count_for(lambda: empty.run(client, keys, args), slot)

    async def measure_async() -> tuple[int, int]:
        aclient = redis_client(url, asyncio=True)
        aping = atake = 0
        try:
            for _ in range(rounds):
                aping += await count_for_async(aclient.ping, slot)
                atake += await count_for_async(lambda: buckets.take_async(aclient, host=HOST, egress="bench"), slot)
            return aping, atake
        finally:
            await aclient.aclose()

    async def measure_batched() -> tuple[int, int, int]:
        aclient = redis_client(url, asyncio=True)

        async def pings() -> None:
            async with aclient.pipeline(transaction=False) as pipe:
                for _ in range(WIDTH):
                    pipe.ping()
                await pipe.execute()

        async def takes() -> None:
            decision = await buckets.take_async(aclient, host=HOST, egress="bench", tokens=WIDTH)
            assert decision.granted == WIDTH, decision  # a rule that never runs dry grants every request asked for

        async def piped_takes() -> None:
            # WIDTH separate take calls in one pipeline, as requests for WIDTH different hosts would need (here all
            # one host's keys: the same script work, the hosts' keys would only differ in name).
            async with aclient.pipeline(transaction=False) as pipe:
                for _ in range(WIDTH):
                    pipe.evalsha(buckets.script.sha, len(keys), *keys, *args)
                await pipe.execute()

        bping = btake = ptake = 0
        try:
            for _ in range(rounds):
                bping += WIDTH * await count_for_async(pings, slot)
                btake += WIDTH * await count_for_async(takes, slot)
                ptake += WIDTH * await count_for_async(piped_takes, slot)
            return bping, btake, ptake
        finally:
            await aclient.aclose()

    aping, atake = asyncio.run(measure_async())
    bping, btake, ptake = asyncio.run(measure_batched())
    return {
        "ping_per_s": ping / seconds,
        "take_per_s": take / seconds,
        "empty_script_per_s": bare / seconds,
        "async_ping_per_s": aping / seconds,
        "async_take_per_s": atake / seconds,
        "batched_ping_per_s": bping / seconds,
        "batched_take_per_s": btake / seconds,
        "pipelined_take_per_s": ptake / seconds,
    }


def controller_cost(url: str, seconds: float, rounds: int = 6) -> dict[str, float]:
    """Requests per second through take alone (adaptive off) and take + observe (adaptive on), same rule otherwise."""
    client = redis_client(url)
    plain = buckets_with(client, replace(NEVER_DRY, adaptive=False))
    rule_key = plain.rule_key("example.com")
    on, off = NEVER_DRY.as_redis(), replace(NEVER_DRY, adaptive=False).as_redis()
    adaptive = AdaptiveController(buckets=plain, config=AdaptiveConfig())

    def take_plain() -> None:
        plain.take(client, host=HOST, egress="bench")

    pending = {"observed": Observed(), "since": time.monotonic()}

    def take_and_observe() -> None:
        plain.take(client, host=HOST, egress="bench")
        pending["observed"].add(latency=0.05, error=False)
        if time.monotonic() - pending["since"] >= OBSERVE_SECONDS:
            adaptive.observe(client, host=HOST, observed=pending["observed"])
            pending.update(observed=Observed(), since=time.monotonic())

    take_plain(), take_and_observe()  # loads both scripts
    slot, plain_n, adaptive_n = seconds / rounds, 0, 0
    for _ in range(rounds):
        client.set(rule_key, off)
        plain_n += count_for(take_plain, slot)
        client.set(rule_key, on)
        adaptive_n += count_for(take_and_observe, slot)
    return {
        "plain_take_per_s": plain_n / seconds,
        "take_and_observe_per_s": adaptive_n / seconds,
        "cost_ratio": plain_n / adaptive_n if adaptive_n else float("inf"),
    }


def slots_cost(url: str, seconds: float, rounds: int = 6) -> dict[str, float]:
    """Requests per second through the plain take, the take holding a slot, and take + the slot given back."""
    client = redis_client(url)
    buckets = buckets_with(client, replace(NEVER_DRY, concurrency=10**9))  # slots counted, never all held
    slots_key = buckets.slots_key("example.com")

    def plain() -> None:
        buckets.take(client, host=HOST, egress="bench")

    def holding() -> None:
        buckets.take(client, host=HOST, egress="bench", holder="bench")

    def held_and_given_back() -> None:
        buckets.take(client, host=HOST, egress="bench", holder="bench")
        SLOTS_SCRIPT.run(client, [slots_key], ["bench", "release", 1, buckets.slot_lease])

    plain(), held_and_given_back()  # loads both scripts
    slot, counts = seconds / rounds, {"plain": 0, "holding": 0, "released": 0}
    for _ in range(rounds):
        counts["plain"] += count_for(plain, slot)
        counts["holding"] += count_for(holding, slot)
        counts["released"] += count_for(held_and_given_back, slot)
    per_s = {name: count / seconds for name, count in counts.items()}
    return {
        "plain_take_per_s": per_s["plain"],
        "take_with_slot_per_s": per_s["holding"],
        "take_and_release_per_s": per_s["released"],
        "take_with_slot_cost": per_s["plain"] / per_s["holding"],
        "take_and_release_cost": per_s["plain"] / per_s["released"],
    }
