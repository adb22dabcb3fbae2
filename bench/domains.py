"""100,000 domains: rules, adaptive state and finished-job counters for each, and what reading them costs.

(a) /metrics: median time of --scrapes scrapes with --domains domains (rules mirrored, adaptive state for every one,
    a third of them slowed, one finished job counted per domain), against a baseline measured first in the same run
    with none, and the number of series it answers with.
(b) A rule reload: while the mirror reloads every rule (after a change behind the services' back, found by the
    periodic check), a client takes tokens for random domains as fast as it can; every answer that says "stale"
    (a take that would have to wait for the reload) is counted.
(c) Redis's SLOWLOG (threshold 10 ms) over (a) and (b): every command over it, by name.

    .venv/bin/python bench/domains.py [--domains 100000] [--scrapes 5]

Starts its own Redis (BENCH_DOMAINS_REDIS_URL, default redis://127.0.0.1:6391/0) so that its SLOWLOG holds only
this run, and a throwaway SQLite database. The last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _common import exit_on_sigterm  # also puts the repository on sys.path

SLOW_MICROSECONDS = 10_000
TOKEN = "bench-metrics-token"


def seed(count: int) -> None:
    """Rules, adaptive states and counters of `count` domains, written the way Trawl writes them."""
    from ops.stats import job_dimensions, stats_record
    from project.redis import get_redis
    from throttling.adaptive import AdaptiveState
    from throttling.controller import adaptive_state_store
    from throttling.models import DomainThrottle
    from throttling.services import throttle_buckets, throttle_rules_load

    names = [f"d{number}.bench" for number in range(count)]
    DomainThrottle.objects.bulk_create([DomainThrottle(domain=name, rate=5, ip_rate=5) for name in names], 5000)
    throttle_rules_load()
    client, buckets = get_redis(), throttle_buckets()
    for number, name in enumerate(names):
        factor = 0.5 if number % 3 == 0 else 1.0
        state = AdaptiveState(factor=factor, baseline=0.05, reason="slowed down: 20% errors" if factor < 1 else "")
        adaptive_state_store(client, buckets=buckets, name=name, state=state)
    now = time.time()
    for name in names:
        numbers = {"jobs:succeeded": 1, "pages": 3, "requests": 3 + random.randrange(100)}
        stats_record(at=now, dimensions=job_dimensions(domain=name, scraper="link", version="1"), numbers=numbers)


def scrape_metrics(scrapes: int) -> tuple[float, int]:
    """Median seconds per /metrics scrape, and the series (sample lines) it answered with."""
    from django.test import Client

    client, times, body = Client(), [], ""
    for _ in range(scrapes):
        started = time.perf_counter()
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", HTTP_HOST="127.0.0.1")
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
        body = response.content.decode()
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    return statistics.median(times), series


def reload_under_takes(count: int) -> tuple[int, int, float]:
    """Takes answered during a full reload of the mirror: (all, stale), and the reload's seconds."""
    from django.utils import timezone

    from project.redis import get_redis
    from throttling.buckets import STALE
    from throttling.models import DomainThrottle
    from throttling.services import throttle_buckets, throttle_rules_check

    changed = DomainThrottle.objects.filter(domain="d1.bench")
    changed.update(rate=7, updated_at=timezone.now())  # behind the services' back, as a shell's save() would
    get_redis().delete(f"{throttle_buckets().prefix}:{{rules}}:checked")  # the check's period is over
    answers, stop = [], threading.Event()

    def take() -> None:
        client, buckets = get_redis(), throttle_buckets()
        while not stop.is_set():
            host = f"www.d{random.randrange(count)}.bench"
            answers.append(buckets.take(client, host=host, egress="bench").status)

    taker = threading.Thread(target=take)
    taker.start()
    time.sleep(0.2)
    started = time.perf_counter()
    reloaded = throttle_rules_check()
    seconds = time.perf_counter() - started
    time.sleep(0.2)
    stop.set()
    taker.join()
    assert reloaded, "the check should have found the change and reloaded"
    return len(answers), sum(status == STALE for status in answers), seconds


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", type=int, default=100_000)
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_DOMAINS_REDIS_URL", "redis://127.0.0.1:6391/0"))
    args = parser.parse_args()
    exit_on_sigterm()
    from project.redis.server import redis_start_if_absent

    server = redis_start_if_absent(args.redis_url, log_path=os.path.join(tempfile.gettempdir(), "bench-redis.log"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-domains-"))
    os.environ.update(
        REDIS_URL=args.redis_url,
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=f"sqlite:///{tmp / 'bench.sqlite3'}",
        TRAWL_STATS_METRICS_TOKEN=TOKEN,
    )
    import django

    django.setup()
    from django.core.management import call_command

    from project.redis import get_redis

    try:
        call_command("migrate", verbosity=0)
        client = get_redis()
        client.flushdb()
        client.config_set("slowlog-log-slower-than", SLOW_MICROSECONDS)
        scrape_metrics(1)  # warm: imports, URL resolution, the first connection
        base_seconds, base_series = scrape_metrics(args.scrapes)
        started = time.perf_counter()
        seed(args.domains)
        print(f"seeded {args.domains:,} domains in {time.perf_counter() - started:.0f} s")
        client.slowlog_reset()
        seconds, series = scrape_metrics(args.scrapes)
        takes, stale, reload_seconds = reload_under_takes(args.domains)
        slow = list(client.slowlog_get(128))
    finally:
        if server is not None:
            server.terminate()
    slow_names = sorted({_text(entry["command"]).split()[0] for entry in slow})
    print(f"/metrics, {args.domains:,} domains: {seconds * 1000:.0f} ms, {series} series")
    print(f"/metrics, no domains (baseline): {base_seconds * 1000:.0f} ms, {base_series} series")
    print(f"ratio: {seconds / base_seconds:.2f}")
    print(f"rule reload: {reload_seconds:.1f} s; takes meanwhile: {takes:,}, stale: {stale}")
    print(f"SLOWLOG over {SLOW_MICROSECONDS / 1000:.0f} ms: {len(slow)} {slow_names}")
    summary = {
        "bench": "domains",
        "domains": args.domains,
        "metrics_ms": round(seconds * 1000, 1),
        "metrics_baseline_ms": round(base_seconds * 1000, 1),
        "series": series,
        "reload_seconds": round(reload_seconds, 2),
        "takes_during_reload": takes,
        "stale": stale,
        "slowlog": slow_names,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
