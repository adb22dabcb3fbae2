"""Dispatching: one pass of `sources_dispatch_due` over 100,000 sources of which 10,000 are due, on SQLite and on
PostgreSQL, and of 100,000 due (all of them) to show the pass grows linearly. Measured per pass: wall time, SQL
queries (counted) and how much the process's resident memory grew at its peak (sampled every 20 ms), then
the same for the next pass (with nothing due: what beat pays every minute). Baseline, in the same run and database:
the least any dispatcher does — one SELECT of the due sources' ids and one bulk INSERT of a bare job row per due
source — so the ratio says what booking, windows, publishing and transactions cost on top.

    .venv/bin/python bench/dispatch.py [--sources 100000] [--due 10000,100000] [--rounds 3] [--backends sqlite,postgres]

A pass is given the whole due count as its limit (TRAWL_SCHEDULING_DISPATCH_MAX caps beat's passes at 10,000).

Every round rebuilds the sources. SQLite: a throwaway file. PostgreSQL: the database named by BENCH_DISPATCH_PG_URL
(default postgres://postgres@127.0.0.1:5432/trawl_bench_dispatch; created and dropped). Jobs are really published to
the Redis at BENCH_DISPATCH_REDIS_URL (default redis://127.0.0.1:6379/12, started if absent; flushed after each pass).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from _common import BASE_DIR, PYTHON

PG_URL = os.environ.get("BENCH_DISPATCH_PG_URL", "postgres://postgres@127.0.0.1:5432/trawl_bench_dispatch")
REDIS_URL = os.environ.get("BENCH_DISPATCH_REDIS_URL", "redis://127.0.0.1:6379/12")


@contextmanager
def peak_rss_growth(into: dict):
    """Samples this process's resident memory while the block runs; stores the peak's growth (MiB) in `into`."""
    import psutil

    process, done = psutil.Process(), threading.Event()
    start = peak = process.memory_info().rss

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield
    finally:
        done.set()
        sampler.join()
        into["peak_rss_growth_mib"] = round((max(peak, process.memory_info().rss) - start) / 2**20, 1)


@contextmanager
def counted_queries(connection):
    """Counts the statements run in the block, keeping none of their SQL (Django's query log would keep every bulk
    INSERT's text, and its growth would be counted as the pass's memory)."""
    counter = {"queries": 0}

    def count(execute, sql, params, many, context):
        counter["queries"] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        yield counter


@contextmanager
def timed_calls(module, name: str, *, into: list[float]):
    """Appends the wall time of each call of `module.name` made in the block to `into`."""
    real = getattr(module, name)

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - started)

    setattr(module, name, timed)
    try:
        yield
    finally:
        setattr(module, name, real)


def measure(*, sources: int, due: int, rounds: int) -> dict:
    """Runs inside a child whose DATABASE_URL names the database under test."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from crawls.models import CrawlJob
    from project.redis import get_redis
    from registry.builtins import builtins_ensure
    from registry.models import Scraper
    from sources.models import Source
    from sources.services import dispatch
    from sources.services.dispatch import sources_dispatch_due

    call_command("migrate", verbosity=0)
    builtins_ensure()
    link = Scraper.objects.get(name="link")
    results = []
    for _ in range(rounds):
        CrawlJob.objects.all().delete()
        Source.objects.all().delete()
        now = timezone.now()
        later, earlier = now + timezone.timedelta(hours=1), now - timezone.timedelta(minutes=1)
        Source.objects.bulk_create(
            [
                Source(
                    url=f"http://shop{n % 500}.test/list/{n}", scraper=link, next_sync_at=earlier if n < due else later
                )
                for n in range(sources)
            ],
            batch_size=5000,
        )
        started = time.perf_counter()
        with transaction.atomic():
            ids = list(Source.objects.filter(enabled=True, next_sync_at__lte=now).values_list("pk", flat=True))
            CrawlJob.objects.bulk_create(
                [CrawlJob(url="http://x.test/", scraper=link, source_id=pk) for pk in ids], batch_size=1000
            )
            baseline = time.perf_counter() - started
            transaction.set_rollback(True)
        memory: dict = {}
        chunk_seconds: list[float] = []
        with (
            counted_queries(connection) as first,
            peak_rss_growth(memory),
            timed_calls(dispatch, "sources_book_due", into=chunk_seconds),
        ):
            started = time.perf_counter()
            published = sources_dispatch_due(now=now, lease=False, limit=due)
            first_seconds = time.perf_counter() - started
        get_redis().flushdb()
        with counted_queries(connection) as second:
            started = time.perf_counter()
            again = sources_dispatch_due(now=now, lease=False, limit=due)
            second_seconds = time.perf_counter() - started
        assert published == due == CrawlJob.objects.count() and not again, (published, again)
        results.append(
            {
                "pass_seconds": first_seconds,
                "pass_queries": first["queries"],
                "idle_pass_seconds": second_seconds,
                "idle_pass_queries": second["queries"],
                "baseline_seconds": baseline,
                # Linear means each chunk costs the same at the end of a pass as at its start.
                "chunk_seconds_first_tenth": statistics.mean(chunk_seconds[: max(1, len(chunk_seconds) // 10)]),
                "chunk_seconds_last_tenth": statistics.mean(chunk_seconds[-max(1, len(chunk_seconds) // 10) :]),
                **memory,
            }
        )
    best = min(results, key=lambda row: row["pass_seconds"])
    return {
        "backend": connection.vendor,
        "sources": sources,
        "due": due,
        **{key: round(value, 3) if isinstance(value, float) else value for key, value in best.items()},
        "peak_rss_growth_mib": max(row["peak_rss_growth_mib"] for row in results),  # the worst round's
        "median_pass_seconds": round(statistics.median(row["pass_seconds"] for row in results), 3),
        "ratio_to_baseline": round(best["pass_seconds"] / best["baseline_seconds"], 2),
    }


def run_backend(backend: str, args: argparse.Namespace, *, due: int) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", "REDIS_URL": REDIS_URL}
    env["PYTHONPATH"] = str(BASE_DIR)
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "sqlite":
            env["DATABASE_URL"] = f"sqlite:///{Path(tmp) / 'dispatch.sqlite3'}"
        else:
            env["DATABASE_URL"] = PG_URL
            _pg(PG_URL, "create")
        try:
            command = [PYTHON, __file__, "--child", "--sources", str(max(args.sources, due)), "--due", str(due)]
            command += ["--rounds", str(args.rounds)]
            out = subprocess.run(command, env=env, cwd=BASE_DIR, capture_output=True, text=True, check=False)
        finally:
            if backend != "sqlite":
                _pg(PG_URL, "drop")
    if out.returncode != 0:
        raise SystemExit(f"{backend} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _pg(url: str, action: str) -> None:
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        if action == "create":
            connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
            connection.execute(f'CREATE DATABASE "{name}"')
        else:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_answers(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(f"{url.rpartition('/')[0]}/postgres", connect_timeout=3):
            return True
    except Exception:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=100_000)
    parser.add_argument("--due", default="10000,100000", help="due counts, one row each (sources: at least as many)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(sources=args.sources, due=int(args.due), rounds=args.rounds)))
        return
    from project.redis.server import redis_start_if_absent

    redis = redis_start_if_absent(REDIS_URL)
    try:
        results = []
        for backend in args.backends.split(","):
            if backend == "postgres" and not _pg_answers(PG_URL):
                print(f"postgres: skipped, nothing answers at {PG_URL.rpartition('/')[0]}", file=sys.stderr)
                continue
            results += [run_backend(backend, args, due=int(due)) for due in args.due.split(",")]
    finally:
        if redis is not None:
            redis.terminate()
    for row in results:
        print(
            f"{row['backend']:>10}: {row['sources']:,} sources, {row['due']:,} due: pass {row['pass_seconds']} s "
            f"({row['pass_queries']} queries), idle pass {row['idle_pass_seconds']} s ({row['idle_pass_queries']} "
            f"queries); baseline {row['baseline_seconds']} s, ratio {row['ratio_to_baseline']}; peak RSS growth "
            f"{row['peak_rss_growth_mib']} MiB; a chunk of {row['chunk_seconds_first_tenth']} s in the pass's first "
            f"tenth, {row['chunk_seconds_last_tenth']} s in its last",
            file=sys.stderr,
        )
    for backend in {row["backend"] for row in results}:
        passes = {row["due"]: row["pass_seconds"] for row in results if row["backend"] == backend}
        if 10_000 in passes:
            print(f"{backend:>10}: 10,000 due in {passes[10_000]} s (goal <= 5 s)", file=sys.stderr)
        if 10_000 in passes and 100_000 in passes:
            growth = round(passes[100_000] / passes[10_000], 2)
            print(f"{backend:>10}: 100,000 due / 10,000 due = {growth} (goal <= 10: linear)", file=sys.stderr)
    print(json.dumps({"benchmark": "dispatch", "results": results}))


if __name__ == "__main__":
    main()
