"""Crawl throughput: plain `scrapy runspider` (A) against the same crawl as a Trawl job on a real worker (B).

Both crawl a generated local site of interlinked pages with Trawl's Scrapy settings. Rounds alternate A B A B.
Time is crawl time, excluding process start: for Scrapy from the crawler creating the spider to the spider closing,
for Trawl the job's `duration` (claim → finished, so it also pays routing, item upserts and the final bookkeeping).
CPU time is counted over the same spans (Scrapy's process; Trawl's worker pool child).
Prints pages/s per run, the means, Trawl/Scrapy (goal ≥ 0.90), CPU per page and peak RSS (the pool child's, and
its RSS, USS and PSS before its first job).

Then, --rounds times in turn, two plain Scrapy crawls of the site at once (the most two crawling processes get
from this machine: its cores, caches and memory shared) and one job with `parallelism: 2` on a worker with two pool
processes (bench/_durable.py): the job ÷ the pair, and each ÷ the Scrapy mean above.
And a crawl SIGKILLed halfway: pages fetched twice ÷ CONCURRENT_REQUESTS (goal ≤ 1). The site above answers at
once, so every crawler is CPU-bound (the worst case for Trawl's per-page work in Redis and the database) and a
second shard only helps with a spare core; both measures (one job, parallelism 2) are repeated on a site whose every
answer takes --latency seconds (as a real site's do), against plain Scrapy on that site.
Last, issue 33's three goals from this one run: parallel job ÷ the pair ≥ 0.90, CPU per page Trawl ÷ Scrapy ≤ 1.10,
peak RSS of the pool child ÷ Scrapy's ≤ 1.35; the last line is a JSON summary.

    .venv/bin/python bench/crawl.py [--pages 2000] [--rounds 2] [--latency 0.1] [--latency-pages 2000] [--single-only]

Trawl's throttle gets a rule for the site that never runs dry, so it costs its Redis round trip but never waits.
Uses Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/4, started if absent) and a throwaway SQLite file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
from _common import BENCH_REDIS_URL, BusyCores, PeakRss, bench_run, mib, stop
from _durable import PARALLEL_GOAL, durable
from _setup import GOAL, MAXDEPTH, Run, bench_site, run_scrapy, scrapy_settings_args, start_worker, tail

CPU_GOAL = 1.10  # issue 33: CPU per page of the pool child ÷ plain Scrapy's process, same crawl
RSS_GOAL = 1.35  # issue 33: peak RSS of the pool child ÷ plain Scrapy's process, same crawl


def run_trawl(url: str, worker: subprocess.Popen, tmp: Path, timeout: float) -> Run:
    from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
    from crawls.services import job_create

    children = psutil.Process(worker.pid).children()
    pool = [child.pid for child in children]
    cpu_before = sum(sum(child.cpu_times()[:2]) for child in children)
    with BusyCores() as busy, PeakRss(lambda: pool) as rss:
        job = job_create(url=url, options={"maxdepth": MAXDEPTH})
        deadline = time.monotonic() + timeout
        while job.status in ACTIVE_STATUSES and time.monotonic() < deadline:
            time.sleep(0.1)
            job = CrawlJob.objects.get(pk=job.pk)
    if job.status != JobStatus.SUCCEEDED:
        outcome = f"still {job.status} after {timeout:.0f} s" if job.status in ACTIVE_STATUSES else job.status
        raise RuntimeError(f"job {job.pk} {outcome} {job.error_class} {job.error_message}\n{tail(tmp / 'worker.log')}")
    cpu = sum(sum(child.cpu_times()[:2]) for child in children) - cpu_before
    stats = job.stats
    note = ", ".join(f"items {change} {stats.get(f'items_{change}', 0)}" for change in ("new", "changed", "unchanged"))
    note += f", machine {busy.cores:.2f} CPUs busy"
    return Run("trawl", stats["pages"], job.duration, cpu, rss.peak, note, busy.cores)


def report(runs: list[Run], pages: int) -> dict:
    groups = {engine: [run for run in runs if run.engine == engine] for engine in ("scrapy", "trawl")}
    mean = {engine: statistics.mean(run.rate for run in group) for engine, group in groups.items()}
    best = {engine: max(run.rate for run in group) for engine, group in groups.items()}
    cpu = {engine: statistics.mean(run.cpu_rate for run in group) for engine, group in groups.items()}
    peak = {engine: max(run.peak_rss for run in group) for engine, group in groups.items()}
    ratio = mean["trawl"] / mean["scrapy"]
    print()
    print(f"mean pages/s          A scrapy {mean['scrapy']:7.1f}   B trawl {mean['trawl']:7.1f}")
    print(f"best pages/s          A scrapy {best['scrapy']:7.1f}   B trawl {best['trawl']:7.1f}")
    print(
        f"pages per CPU-second  A scrapy {cpu['scrapy']:7.1f}   B trawl {cpu['trawl']:7.1f}   (steadier on a busy box)"
    )
    rss_ratio = peak["trawl"] / peak["scrapy"]
    cpu_ratio = cpu["scrapy"] / cpu["trawl"]  # CPU per page, Trawl's ÷ Scrapy's
    print(f"peak RSS              A scrapy {mib(peak['scrapy']):>7}   B trawl {mib(peak['trawl']):>7}   (pool child)")
    print(f"ratio trawl/scrapy {ratio:.3f} (goal >= {GOAL:.2f}): {'PASS' if ratio >= GOAL else 'BELOW GOAL'}")
    if any(run.pages != pages for run in runs):
        print(f"warning: not every run fetched all {pages} pages")
    return {
        "bench": "crawl",
        "pages": pages,
        "scrapy_pages_per_s": [round(run.rate, 1) for run in groups["scrapy"]],
        "trawl_pages_per_s": [round(run.rate, 1) for run in groups["trawl"]],
        "scrapy_mean": round(mean["scrapy"], 1),
        "trawl_mean": round(mean["trawl"], 1),
        "ratio": round(ratio, 3),
        "goal": GOAL,
        "pass": ratio >= GOAL,
        "best_ratio": round(best["trawl"] / best["scrapy"], 3),
        "cpu_ratio": round(cpu["trawl"] / cpu["scrapy"], 3),
        "cpu_per_page_ratio": round(cpu_ratio, 3),
        "cpu_per_page_goal": CPU_GOAL,
        "scrapy_peak_rss_mib": round(peak["scrapy"] / 2**20, 1),
        "scrapy_busy_cores": round(statistics.mean(run.busy_cores for run in groups["scrapy"]), 2),
        "trawl_peak_rss_mib": round(peak["trawl"] / 2**20, 1),
        "peak_rss_ratio": round(rss_ratio, 3),
        "peak_rss_goal": RSS_GOAL,
    }


def settled_memory(worker: subprocess.Popen, timeout: float = 15) -> list:
    """The pool child's memory once it is set up: the worker answers pings before its pool child has started its
    reactor and imported the crawl components, so wait until its RSS stops growing (two samples 0.5 s apart)."""
    last, deadline = 0, time.monotonic() + timeout
    while True:
        infos = [child.memory_full_info() for child in psutil.Process(worker.pid).children()]
        rss = sum(info.rss for info in infos)
        if abs(rss - last) < 2**20 or time.monotonic() > deadline:
            return infos
        last = rss
        time.sleep(0.5)


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    url = bench_site(tmp, stack, redis_url=args.redis_url, pages=args.pages)
    worker = start_worker(tmp, stack)
    # RSS as plain Scrapy's is measured; USS and PSS say how much of it the pool child shares with the worker's parent.
    idle = settled_memory(worker)
    idle_rss, idle_uss, idle_pss = (sum(getattr(info, name) for info in idle) for name in ("rss", "uss", "pss"))
    print(f"crawl bench: {args.pages} pages at {url}, {args.rounds} round(s) of A=scrapy B=trawl, maxdepth {MAXDEPTH}")
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"worker pool child before its first job: RSS {mib(idle_rss)}, USS {mib(idle_uss)}, PSS {mib(idle_pss)}")
    print(f"settings (both): {' '.join(scrapy_settings_args()[1::2])}")
    print("time = crawl time excluding process start (scrapy: spider created->closed; trawl: job claimed->finished)\n")
    engines = {
        "scrapy": lambda number: run_scrapy(url, tmp, number, args.timeout),
        "trawl": lambda number: run_trawl(url, worker, tmp, args.timeout),
    }
    runs = []
    for number in range(1, args.rounds + 1):
        for engine, measure in engines.items():
            run = measure(number)
            runs.append(run)
            print(
                f"round {number} {engine:<6} {run.pages:>5} pages in {run.seconds:6.2f} s = {run.rate:6.1f} pages/s,"
                f" CPU {run.cpu_seconds:5.2f} s, peak RSS {mib(run.peak_rss):>7} ({run.note})",
                flush=True,
            )
    summary = report(runs, args.pages)
    summary |= {"trawl_idle_rss_mib": round(idle_rss / 2**20, 1), "trawl_idle_uss_mib": round(idle_uss / 2**20, 1)}
    summary["trawl_idle_pss_mib"] = round(idle_pss / 2**20, 1)
    stop(worker)  # the durable measures use a worker with two pool processes
    if not args.single_only:
        summary |= durable(args, url, tmp, stack, single=summary)
    goals_report(summary)
    return summary


def goals_report(summary: dict) -> None:
    """Issue 33's three goals, measured in this run against plain Scrapy in this run."""
    print("\ngoals (issue 33), against plain Scrapy in this run:")
    goals = [
        (
            "parallel pages/s, parallelism 2 / two plain Scrapy at once",
            summary.get("parallel_of_pair"),
            ">=",
            PARALLEL_GOAL,
        ),
        ("CPU per page, trawl / scrapy", summary["cpu_per_page_ratio"], "<=", CPU_GOAL),
        ("peak RSS, pool child / scrapy", summary["peak_rss_ratio"], "<=", RSS_GOAL),
    ]
    for name, value, sense, goal in goals:
        if value is None:
            print(f"  {name}: not measured (--single-only)")
            continue
        met = value >= goal if sense == ">=" else value <= goal
        print(f"  {name}: {value:.3f} (goal {sense} {goal:.2f}): {'PASS' if met else 'NOT MET'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of A then B")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one crawl may take")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds each answer of the latency site takes")
    parser.add_argument("--latency-pages", type=int, default=2000, help="pages of the latency site")
    parser.add_argument("--single-only", action="store_true", help="skip the parallel, latency and kill measures")
    parser.add_argument("--redis-url", default=BENCH_REDIS_URL)
    args = parser.parse_args()
    return bench_run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
