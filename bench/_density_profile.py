"""Where a crawl process running many crawls spends its time: --crawls jobs of bench/density.py's sites run at once in
this one process by `job_execute`, each on a thread of its own (as the crawl host pool runs them), without Celery.

    .venv/bin/python bench/_density_profile.py [--crawls 50] [--pages 20] [--rate 2] [--no-hold]
        [--profile cpu|wall|off]

Prints the jobs' durations (10 s at the sites' rate), the process's CPU split between the reactor thread and the
others, and how long the crawls' ticks held the shared reactor (`runtime.bridge.runner.reactor_held`); `--no-hold`
replaces that hold by a no-op, to measure what it costs. `--profile cpu` (thread CPU time) or `wall`: cProfile of the
reactor thread and of the task threads merged. Same database and Redis options as bench/density.py (its database is
recreated).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path

import psutil
from _common import BENCH_REDIS_URL, bench_run, served
from density import DATABASE_URL, MAXDEPTH, addresses, prepare


def timed_holds(runner, held: list[float]) -> None:
    """Add up, in `held` (seconds, holds), the time the reactor waits for the crawls' ticks."""
    release = runner._wait_for_release

    def timed(*args, **kwargs):
        started = time.monotonic()
        try:
            return release(*args, **kwargs)
        finally:
            held[0] += time.monotonic() - started
            held[1] += 1

    runner._wait_for_release = timed


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    prepare(args, tmp)
    from crawls.models import CrawlJob
    from crawls.services import job_create
    from crawls.services.execution import job_execute
    from runtime.bridge import runner
    from runtime.bridge.reactor import ensure_reactor

    ensure_reactor()
    from twisted.internet import reactor

    held = [0.0, 0]
    timed_holds(runner, held)
    if args.no_hold:
        runner.reactor_held = lambda session, limit=0: contextlib.nullcontext()
    timer = {"cpu": [time.thread_time], "wall": [], "off": None}[args.profile]
    reactor_profile, task_profiles = (cProfile.Profile(*timer) if timer is not None else None), []

    def in_reactor(call) -> None:
        done = threading.Event()
        reactor.callFromThread(lambda: (call(), done.set()))
        done.wait()

    def run(job) -> None:
        from django.db import connection

        profile = cProfile.Profile(*timer) if timer is not None else None
        if profile:
            task_profiles.append(profile)
            profile.enable()
        job_execute(job_id=str(job.pk), attempt=1, worker="profile/1")
        if profile:
            profile.disable()
        connection.close()

    hosts = addresses(9, args.crawls)
    with served(tmp / "site", hosts=hosts) as base:
        port = base.rsplit(":", 1)[1]
        jobs = [job_create(url=f"http://{h}:{port}/page-0.html", options={"maxdepth": MAXDEPTH}) for h in hosts]
        process = psutil.Process()
        if reactor_profile:
            in_reactor(reactor_profile.enable)
        threads_before, cpu_before, started = process.threads(), sum(process.cpu_times()[:2]), time.monotonic()
        workers = [threading.Thread(target=run, args=(job,)) for job in jobs]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        wall, cpu = time.monotonic() - started, sum(process.cpu_times()[:2]) - cpu_before
        before = {thread.id: thread.user_time + thread.system_time for thread in threads_before}
        reactor_cpu = max(t.user_time + t.system_time - before.get(t.id, 0) for t in process.threads())
        if reactor_profile:
            in_reactor(reactor_profile.disable)
    jobs = list(CrawlJob.objects.filter(pk__in=[job.pk for job in jobs]))
    durations = sorted(job.duration for job in jobs)
    median = durations[len(durations) // 2]
    pages = sum((job.stats or {}).get("pages", 0) for job in jobs)
    print(f"{len(jobs)} jobs at once in {wall:.1f} s: {sorted({job.status for job in jobs})}, {pages} pages")
    print(f"job durations: min {durations[0]:.1f}, median {median:.1f}, max {durations[-1]:.1f} s")
    print(
        f"CPU {cpu:.2f} s ({1000 * cpu / len(jobs):.0f} ms a job): reactor thread {reactor_cpu:.2f} s, others "
        f"{cpu - reactor_cpu:.2f} s; the reactor held by ticks {held[0]:.1f} s in {held[1]} holds"
    )
    if reactor_profile:
        for name, profiles in (("reactor thread", [reactor_profile]), ("task threads", task_profiles)):
            print(f"==== {name}")
            stats = pstats.Stats(*profiles)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(15)
            if args.dump:
                stats.dump_stats(Path(args.dump) / f"{name.replace(' ', '_')}.prof")
    return {
        "bench": "density_profile",
        "crawls": len(jobs),
        "hold": not args.no_hold,
        "median_job_seconds": round(median, 1),
        "cpu_ms_per_job": round(1000 * cpu / len(jobs)),
        "pages": pages,
        "cpu_ms_per_page": round(1000 * cpu / max(1, pages), 2),
        "reactor_cpu_seconds": round(reactor_cpu, 2),
        "reactor_held_seconds": round(held[0], 1),
        "wall_seconds": round(wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crawls", type=int, default=50)
    parser.add_argument("--pages", type=int, default=20, help="pages of each site (two runs split a job's CPU)")
    parser.add_argument("--rate", type=float, default=2.0, help="requests a second each site allows")
    parser.add_argument("--no-hold", action="store_true", help="ticks never hold the reactor")
    parser.add_argument("--profile", choices=("cpu", "wall", "off"), default="off")
    parser.add_argument("--dump", help="a directory to write the profiles to (pstats files), for pstats' callers")
    parser.add_argument("--database-url", default=DATABASE_URL)
    parser.add_argument("--redis-url", default=BENCH_REDIS_URL)
    args = parser.parse_args()
    args.sites = args.crawls  # bench/density.py's sites, as its `prepare` makes them
    return bench_run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
