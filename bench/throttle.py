"""Throttle: what a token costs against a bare Redis round trip, and how exactly several processes keep a rate.

(a) Cost. One client, back to back, for --seconds each: PING/s, then bucket-script takes/s on a rule that never
    runs dry (the script's full work: two buckets, TIME, writes). Printed as take/PING, for a blocking client and
    for the asyncio client the Scrapy middleware uses, beside an empty script called with the take's keys and
    arguments (what EVALSHA itself costs: the most any one-script take could reach). Then the same at the
    middleware's concurrency: WIDTH requests of one process waiting at once, which the middleware asks for in one
    take (tokens=WIDTH), against WIDTH PINGs sent in one pipeline (PING's own way of batching): requests granted/s ÷
    PINGs/s, same asyncio client; and WIDTH separate takes in one pipeline (what requests for WIDTH different hosts
    would cost if the middleware pipelined them; today it sends them concurrently on the pool's connections).
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
import json
import multiprocessing
import os
import sys
import tempfile
import time

from _common import exit_on_sigterm  # also puts the repository on sys.path
from _throttle_cost import HOST, PREFIX, WIDTH, buckets_with, controller_cost, cost, slots_cost

from project.redis import redis_client
from project.redis.server import redis_start_if_absent
from throttling.buckets import GRANTED, Limits, TokenBuckets

TAKE_PING_GOAL = 0.70  # issue #33: a two-bucket take costs at most 1/0.70 of a PING round trip


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
        empty = c["empty_script_per_s"]
        print(
            f"  blocking client: PING {c['ping_per_s']:,.0f}/s, take {c['take_per_s']:,.0f}/s; an empty script with the"
            f" take's keys and arguments {empty:,.0f}/s (÷ PING {empty / c['ping_per_s']:.2f})",
            flush=True,
        )
        print(f"  asyncio client:  PING {c['async_ping_per_s']:,.0f}/s, take {c['async_take_per_s']:,.0f}/s")
        c["ratio"] = c["take_per_s"] / c["ping_per_s"]
        c["async_ratio"] = c["async_take_per_s"] / c["async_ping_per_s"]
        c["batched_ratio"] = c["batched_take_per_s"] / c["batched_ping_per_s"]
        print(
            f"  take/PING = {c['ratio']:.2f} (blocking), {c['async_ratio']:.2f} (asyncio), one request at a time",
            flush=True,
        )
        print(
            f"  {WIDTH} requests at once: PING pipelined {c['batched_ping_per_s']:,.0f}/s, take "
            f"{c['batched_take_per_s']:,.0f} requests/s: take/PING = {c['batched_ratio']:.2f}; "
            f"goal >= {TAKE_PING_GOAL}",
            flush=True,
        )
        c["pipelined_ratio"] = c["pipelined_take_per_s"] / c["batched_ping_per_s"]
        print(
            f"  {WIDTH} separate takes in one pipeline (requests for {WIDTH} different hosts):"
            f" {c['pipelined_take_per_s']:,.0f} requests/s: take/PING = {c['pipelined_ratio']:.2f}",
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
