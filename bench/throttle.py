"""Throttle: what a token costs against a bare Redis round trip, and how exactly several processes keep a rate.

(a) Cost. One client, back to back, for --seconds each: PING/s, then bucket-script takes/s on a rule that never
    runs dry (the script's full work: two buckets, TIME, writes). Printed as take/PING, for a blocking client and
    for the asyncio client the Scrapy middleware uses.
(a') Controller. The adaptive controller's cost per request: take, plus counting the response and adding the counts
    to the domain's window every OBSERVE_SECONDS (what the middleware does for every request on an adaptive rule),
    against the plain two-bucket take on the same rule with `adaptive` off, alternating rounds, blocking client.
    Printed as a ratio (1.0 = free).
(a'') Slots. The cluster-wide in-flight slot per request: the take also taking a slot (holder given), and that plus
    giving it back (what the middleware sends when the response comes, without the request waiting for it), against
    the plain take without slots on the same rule, alternating rounds, blocking client. Printed as ratios.
(b) Accuracy. --processes processes (default 4) take tokens for one domain configured at --rate R, burst B, for
    --duration s (default 30), each sleeping what the script says, as the middleware does. Prints observed/configured
    rate, (grants − B) / (R × duration), and the most grants in any 1-second window against R + B.

    .venv/bin/python bench/throttle.py [--rate 50] [--burst 10] [--duration 30] [--processes 4] [--seconds 6]

Uses Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/10, started if absent) under a key prefix of its own.
The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import replace

import redis
import redis.asyncio
from _common import exit_on_sigterm  # also puts the repository on sys.path

from project.redis import redis_client
from project.redis_server import redis_start_if_absent
from throttling.adaptive import AdaptiveConfig
from throttling.buckets import GRANTED, Limits, TokenBuckets
from throttling.controller import OBSERVE_SECONDS, AdaptiveController, Observed
from throttling.slots import SCRIPT as SLOTS_SCRIPT

PREFIX = "trawl:bench-throttle"
HOST = "bench.example.com"
TAKE_PING_GOAL = 0.70  # issue #33: a two-bucket take costs at most 1/0.70 of a PING round trip
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
    slot = seconds / rounds
    ping = take = 0
    for _ in range(rounds):
        ping += count_for(client.ping, slot)
        take += count_for(lambda: buckets.take(client, host=HOST, egress="bench"), slot)

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

    aping, atake = asyncio.run(measure_async())
    return {
        "ping_per_s": ping / seconds,
        "take_per_s": take / seconds,
        "async_ping_per_s": aping / seconds,
        "async_take_per_s": atake / seconds,
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


def taker(url: str, limits: Limits, start_at: float, stop_at: float) -> list[float]:
    """One process of (b): take like the middleware (sleep what the script says); return when each grant came."""
    client = redis_client(url)
    buckets = TokenBuckets(defaults=limits, prefix=PREFIX)
    grants = []
    time.sleep(max(0.0, start_at - time.time()))
    while time.time() < stop_at:
        decision = buckets.take(client, host=HOST, egress="bench")
        if decision.status == GRANTED:
            grants.append(time.time())
        else:
            time.sleep(min(decision.wait, max(0.0, stop_at - time.time())))
    return grants


def most_in_any_window(times: list[float], window: float = 1.0) -> int:
    times, most, first = sorted(times), 0, 0
    for last, moment in enumerate(times):
        while moment - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


def accuracy(url: str, *, rate: float, burst: int, duration: float, processes: int) -> dict[str, float]:
    limits = Limits(rate=rate, burst=burst, ip_rate=rate * 100, ip_burst=burst * 100)
    buckets_with(redis_client(url), limits)
    start_at = time.time() + 3.0  # every process has started by then
    stop_at = start_at + duration
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        per_process = pool.starmap(taker, [(url, limits, start_at, stop_at)] * processes)
    grants = sorted(grant for grants in per_process for grant in grants)
    return {
        "grants": len(grants),
        "per_process": [len(grants) for grants in per_process],
        "observed_over_configured": (len(grants) - burst) / (rate * duration),
        "max_in_1s": most_in_any_window(grants),
        "allowed_in_1s": rate + burst,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/10"))
    parser.add_argument("--seconds", type=float, default=6.0, help="time given to each call in (a)")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    exit_on_sigterm()
    server = redis_start_if_absent(args.redis_url, log_path=os.path.join(tempfile.gettempdir(), "bench-redis.log"))
    try:
        print(f"Redis {args.redis_url}; cost: {args.seconds:.0f} s of each call, in alternating rounds", flush=True)
        c = cost(args.redis_url, args.seconds)
        print(f"  blocking client: PING {c['ping_per_s']:,.0f}/s, take {c['take_per_s']:,.0f}/s", flush=True)
        print(f"  asyncio client:  PING {c['async_ping_per_s']:,.0f}/s, take {c['async_take_per_s']:,.0f}/s")
        c["ratio"] = c["take_per_s"] / c["ping_per_s"]
        c["async_ratio"] = c["async_take_per_s"] / c["async_ping_per_s"]
        print(
            f"  take/PING = {c['ratio']:.2f} (blocking), {c['async_ratio']:.2f} (asyncio); goal >= {TAKE_PING_GOAL}",
            flush=True,
        )
        ctl = controller_cost(args.redis_url, args.seconds)
        print(
            f"controller: plain take {ctl['plain_take_per_s']:,.0f}/s, take + observe "
            f"{ctl['take_and_observe_per_s']:,.0f}/s: cost per request x{ctl['cost_ratio']:.2f}",
            flush=True,
        )
        sl = slots_cost(args.redis_url, args.seconds)
        print(
            f"slots: plain take {sl['plain_take_per_s']:,.0f}/s, take with a slot {sl['take_with_slot_per_s']:,.0f}/s "
            f"(x{sl['take_with_slot_cost']:.2f}), take + give back {sl['take_and_release_per_s']:,.0f}/s "
            f"(x{sl['take_and_release_cost']:.2f})",
            flush=True,
        )
        print(
            f"accuracy: {args.processes} processes, rate {args.rate:g}/s, burst {args.burst}, {args.duration:.0f} s",
            flush=True,
        )
        a = accuracy(args.redis_url, rate=args.rate, burst=args.burst, duration=args.duration, processes=args.processes)
        print(f"  grants {a['grants']} (per process {a['per_process']})")
        print(f"  observed/configured rate = {a['observed_over_configured']:.3f}")
        print(f"  most in any 1 s window = {a['max_in_1s']} (allowed rate + burst = {a['allowed_in_1s']:g})")
        print(json.dumps({"bench": "throttle", "cost": c, "controller": ctl, "slots": sl, "accuracy": a}))
        return 0 if a["max_in_1s"] <= a["allowed_in_1s"] else 1
    finally:
        client = redis_client(args.redis_url, decode=False)
        for key in client.scan_iter(f"{PREFIX}:*", count=1000):
            client.delete(key)
        if server is not None:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
