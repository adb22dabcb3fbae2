"""Crawl throughput: plain `scrapy runspider` (A) against the same crawl as a Trawl job on a real worker (B).

Both crawl a generated local site of interlinked pages with Trawl's Scrapy settings. Rounds alternate A B A B.
Time is crawl time, excluding process start: for Scrapy from the crawler creating the spider to the spider closing,
for Trawl the job's `duration` (claim → finished, so it also pays routing, item upserts and the final bookkeeping).
CPU time is counted over the same spans (Scrapy's process; Trawl's worker pool child).
Prints pages/s per run, the means, Trawl/Scrapy (goal ≥ 0.90) and the peak RSS ratio (goal ≤ 1.35); the last line is
a JSON summary.

Then, --rounds times in turn, two plain Scrapy crawls of the site at once (the most two crawling processes get
from this machine: its cores, caches and memory shared) and one job with `parallelism: 2` on a worker with two pool
processes (bench/_durable.py); their mean ÷ the Scrapy mean above (goal ≥ 1.7 for the job), and the job ÷ the pair.
And a crawl SIGKILLed halfway: pages fetched twice ÷ CONCURRENT_REQUESTS (goal ≤ 1). The site above answers at
once, so every crawler is CPU-bound (the worst case for Trawl's per-page work in Redis and the database) and a
second shard only helps with a spare core; both measures (one job, parallelism 2) are repeated on a site whose every
answer takes --latency seconds (as a real site's do), against plain Scrapy on that site.

    .venv/bin/python bench/crawl.py [--pages 2000] [--rounds 2] [--latency 0.1] [--latency-pages 2000] [--single-only]

Trawl's throttle gets a rule for the site that never runs dry, so it costs its Redis round trip but never waits.
Uses Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/13, started if absent) and a throwaway SQLite file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from _common import (
    BASE_DIR,
    BENCH_DIR,
    PYTHON,
    BusyCores,
    PeakRss,
    exit_on_sigterm,
    mib,
    running,
    served,
    spawn,
    stop,
    write_link_site,
)
from _durable import PARALLEL_GOAL, REFETCH_GOAL, run_job, run_killed

GOAL = 0.90
RSS_GOAL = 1.35  # peak RSS of the pool child ÷ plain Scrapy's process, same crawl (issue 33)
MAXDEPTH = 50
SPIDER = BENCH_DIR / "spiders" / "link.py"
TRAWL_PACKAGES = ("crawls.", "throttling.", "items.", "project.")


@dataclass
class Run:
    engine: str
    pages: int
    seconds: float
    cpu_seconds: float
    peak_rss: int
    note: str = ""
    busy_cores: float = 0.0  # the machine's, during the run
    span: tuple[float, float] = (0.0, 0.0)  # time.monotonic() at the crawl's start and end (the machine's clock)

    @property
    def rate(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def cpu_rate(self) -> float:
        """Pages per CPU-second: steadier than pages/s when other work shares the machine."""
        return self.pages / self.cpu_seconds if self.cpu_seconds else 0.0


def use_bench_environment(tmp: Path, redis_url: str) -> None:
    """Point this process, and every process it starts, at a fresh SQLite file and the bench Redis.

    Done before anything imports Trawl: project.env reads these variables once, at import.
    """
    os.environ.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=f"sqlite:///{tmp / 'bench.sqlite3'}",
        REDIS_URL=redis_url,
        PYTHONPATH=str(BASE_DIR),
        TRAWL_REAPER_STALE_SECONDS="3",  # the kill measure runs the reaper from here: a dead crawl is found at once
    )


def setup_django() -> None:
    subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, check=True)
    import django

    django.setup()
    logging.getLogger("trawl").setLevel(logging.WARNING)  # the worker's log has the details; keep our output short


def scrapy_settings_args() -> list[str]:
    """Trawl's base Scrapy settings as `-s` options. Not its own components (dict settings, and classes of its own
    such as its stats collector): plain Scrapy runs with Scrapy's."""
    from django.conf import settings

    scalars = {
        name: value
        for name, value in settings.TRAWL_SCRAPY_SETTINGS.items()
        if not isinstance(value, dict) and not (isinstance(value, str) and value.startswith(TRAWL_PACKAGES))
    }
    return [arg for name, value in scalars.items() for arg in ("-s", f"{name}={value}")]


def run_scrapy(url: str, tmp: Path, number: int, timeout: float) -> Run:
    from crawls.scraping.outcome import job_stats

    stats_path, log_path = tmp / f"scrapy-{number}.json", tmp / f"scrapy-{number}.log"
    stats_path.unlink(missing_ok=True)  # a crawl that failed to write its stats must not be read as an earlier one
    command = [PYTHON, "-m", "scrapy", "runspider", str(SPIDER), "-a", f"url={url}", "-a", f"maxdepth={MAXDEPTH}"]
    command += ["-a", f"stats_path={stats_path}", *scrapy_settings_args()]
    started = time.monotonic()
    # cwd=tmp: no scrapy.cfg around, so only the settings given here apply.
    with (
        BusyCores() as busy,
        running(spawn(command, cwd=tmp, log_path=log_path)) as process,
        PeakRss(lambda: [process.pid]) as rss,
    ):
        if process.wait(timeout):
            raise RuntimeError(f"scrapy exited with {process.returncode}:\n{tail(log_path)}")
    wall = time.monotonic() - started
    stats = json.loads(stats_path.read_text())
    pages, seconds, cpu = job_stats(stats)["pages"], stats["bench/crawl_seconds"], stats["bench/crawl_cpu_seconds"]
    note = f"process wall {wall:.2f} s, machine {busy.cores:.2f} CPUs busy"
    return Run("scrapy", pages, seconds, cpu, rss.peak, note, busy.cores, tuple(stats["bench/monotonic_span"]))


def run_scrapy_pair(url: str, tmp: Path, timeout: float) -> tuple[float, float]:
    """Two plain Scrapy crawls of the site at once: (pages/s together, CPUs busy). Two processes that share nothing
    but the machine: the most two crawling processes get out of it, whatever they are."""
    with BusyCores() as busy, ThreadPoolExecutor(max_workers=2) as pool:
        runs = [future.result() for future in [pool.submit(run_scrapy, url, tmp, n, timeout) for n in (91, 92)]]
    # From the first crawl's start to the last one's end: neither gets credit for the other's start-up.
    span = max(run.span[1] for run in runs) - min(run.span[0] for run in runs)
    return sum(run.pages for run in runs) / span, busy.cores


def start_worker(
    tmp: Path, stack: contextlib.ExitStack, ready_timeout: float = 60, concurrency: int = 1, env: dict | None = None
) -> subprocess.Popen:
    from project.celery import app

    name = f"trawl-bench-{uuid.uuid4().hex[:8]}"
    command = [PYTHON, "-m", "celery", "-A", "project", "worker", "-Q", "crawls,control,callbacks"]
    command += ["-c", str(concurrency), "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]
    spawned = spawn(command, cwd=BASE_DIR, log_path=tmp / "worker.log", env={**os.environ, **(env or {})})
    process = stack.enter_context(running(spawned, timeout=40))
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline and process.poll() is None:
        if app.control.ping(destination=[f"{name}@{platform.node()}"], timeout=0.5):
            return process
    raise RuntimeError(f"the worker did not get ready within {ready_timeout} s:\n{tail(tmp / 'worker.log')}")


def unthrottle(url: str) -> None:
    """Measure overhead, not politeness: a rule whose buckets never run dry and whose in-flight slots never all
    fill (each request still asks Redis), so parallel shards are not held to one site's cluster-wide concurrency."""
    from throttling.models import DomainThrottle
    from throttling.services import throttle_create

    huge, domain = 10**6, urlsplit(url).hostname
    if not DomainThrottle.objects.filter(domain=domain).exists():  # every local site is on 127.0.0.1
        throttle_create(domain=domain, rate=huge, burst=huge, ip_rate=huge, ip_burst=huge, concurrency=huge)


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


def tail(path: Path, lines: int = 40) -> str:
    with contextlib.suppress(FileNotFoundError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


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
    print(f"peak RSS              A scrapy {mib(peak['scrapy']):>7}   B trawl {mib(peak['trawl']):>7}   (pool child)")
    verdict = "PASS" if rss_ratio <= RSS_GOAL else "ABOVE GOAL"
    print(f"peak RSS ratio trawl/scrapy {rss_ratio:.3f} (goal <= {RSS_GOAL:.2f}): {verdict}")
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
        "scrapy_peak_rss_mib": round(peak["scrapy"] / 2**20, 1),
        "scrapy_busy_cores": round(statistics.mean(run.busy_cores for run in groups["scrapy"]), 2),
        "trawl_peak_rss_mib": round(peak["trawl"] / 2**20, 1),
        "peak_rss_ratio": round(rss_ratio, 3),
        "peak_rss_goal": RSS_GOAL,
    }


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    use_bench_environment(tmp, args.redis_url)
    from project.redis_server import redis_start_if_absent

    start_path = write_link_site(tmp / "site", pages=args.pages)
    url = stack.enter_context(served(tmp / "site")) + start_path
    redis = redis_start_if_absent(args.redis_url, log_path=str(tmp / "redis.log"))
    if redis is not None:
        stack.enter_context(running(redis))
    setup_django()
    unthrottle(url)
    worker = start_worker(tmp, stack)
    idle = sum(child.memory_info().rss for child in psutil.Process(worker.pid).children())
    print(f"crawl bench: {args.pages} pages at {url}, {args.rounds} round(s) of A=scrapy B=trawl, maxdepth {MAXDEPTH}")
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; worker pool child idle RSS {mib(idle)}")
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
    summary = report(runs, args.pages) | {"trawl_idle_rss_mib": round(idle / 2**20, 1)}
    stop(worker)  # the durable measures use a worker with two pool processes
    if args.single_only:
        return summary
    return summary | durable(args, url, tmp, stack, single=summary)


def durable(args: argparse.Namespace, url: str, tmp: Path, stack: contextlib.ExitStack, *, single: dict) -> dict:
    """The parallel and kill measures; `single` is the single-job summary (plain Scrapy's rate and CPU use)."""
    # Heartbeats every second, so the bench's reaper (3 s) finds the killed crawl at once and no live one.
    start_worker(tmp, stack, concurrency=2, env={"TRAWL_HEARTBEAT_SECONDS": "1"})
    log = lambda: tail(tmp / "worker.log")  # noqa: E731
    print()
    pair_rates, rates, busy_cores = [], [], []
    for number in range(1, args.rounds + 1):  # a pair, then the job (the worker idles meanwhile)
        pair_rate, pair_busy = run_scrapy_pair(url, tmp, args.timeout)
        pair_rates.append(pair_rate)
        print(
            f"round {number} two plain Scrapy crawls at once: {pair_rate:.1f} pages/s together,"
            f" machine {pair_busy:.2f} of {os.cpu_count()} CPUs busy",
            flush=True,
        )
        with BusyCores() as busy:
            pages, seconds = run_job(url, maxdepth=MAXDEPTH, timeout=args.timeout, tail=log)
        rates.append(pages / seconds)
        busy_cores.append(busy.cores)
        print(
            f"round {number} parallelism 2, worker -c 2: {pages} pages in {seconds:.2f} s = {pages / seconds:.1f}"
            f" pages/s, machine {busy.cores:.2f} of {os.cpu_count()} CPUs busy"
            f" (plain Scrapy alone: {single['scrapy_busy_cores']:.2f})",
            flush=True,
        )
    ceiling = statistics.mean(pair_rates) / single["scrapy_mean"]
    parallel = statistics.mean(rates) / single["scrapy_mean"]
    print(f"ratio two plain Scrapy crawls at once / one {ceiling:.3f} (the most two crawling processes get here)")
    verdict = "PASS" if parallel >= PARALLEL_GOAL else "BELOW GOAL"
    print(f"ratio parallel trawl/scrapy {parallel:.3f} (goal >= {PARALLEL_GOAL}): {verdict}")
    print(f"ratio parallel trawl / two plain Scrapy crawls at once {parallel / ceiling:.3f}")
    kill = run_killed(tmp, pages=args.pages, maxdepth=MAXDEPTH, timeout=args.timeout, tail=log, unthrottle=unthrottle)
    print(
        f"SIGKILL halfway: {kill.pages} of {args.pages} pages fetched ({kill.never} never), {kill.twice} twice;"
        f" {kill.in_flight_at_kill} in flight at the kill; attempt {kill.attempts}; next page fetched"
        f" {kill.handover_seconds:.1f} s after the kill (3 s stale limit)"
    )
    verdict = "PASS" if kill.ratio <= REFETCH_GOAL else "ABOVE GOAL"
    limit = f"CONCURRENT_REQUESTS ({kill.concurrent_requests})"
    print(f"ratio fetched twice / {limit} {kill.ratio:.3f} (goal <= {REFETCH_GOAL:g}): {verdict}")
    latency = latency_bound(args, tmp)
    return latency | {
        "parallel_pages_per_s": [round(rate, 1) for rate in rates],
        "parallel_ratio": round(parallel, 3),
        "parallel_busy_cores": round(statistics.mean(busy_cores), 2),
        "scrapy_pair_ratio": round(ceiling, 3),
        "parallel_of_pair": round(parallel / ceiling, 3),
        "parallel_goal": PARALLEL_GOAL,
        "killed_pages_twice": kill.twice,
        "killed_pages_never": kill.never,
        "killed_in_flight": kill.in_flight_at_kill,
        "killed_handover_s": round(kill.handover_seconds, 1),
        "refetch_ratio": round(kill.ratio, 3),
        "refetch_goal": REFETCH_GOAL,
    }


def latency_bound(args: argparse.Namespace, tmp: Path) -> dict:
    """Plain Scrapy, one job, then one `parallelism: 2` job, on a site whose every answer takes `--latency` seconds:
    how crawls of real sites, which wait on the network rather than on CPU, compare."""
    start_path = write_link_site(tmp / "latency-site", pages=args.latency_pages)
    log = lambda: tail(tmp / "worker.log")  # noqa: E731
    with served(tmp / "latency-site", delay=args.latency) as base:
        scrapy_run = run_scrapy(base + start_path, tmp, 0, args.timeout)
        one = run_job(base + start_path, maxdepth=MAXDEPTH, timeout=args.timeout, tail=log, parallelism=1)
        two = run_job(base + start_path, maxdepth=MAXDEPTH, timeout=args.timeout, tail=log)
    single, ratio = (pages / seconds / scrapy_run.rate for pages, seconds in (one, two))
    print(f"\nsite answering after {args.latency:g} s: scrapy {scrapy_run.pages} pages in {scrapy_run.seconds:.2f} s")
    for name, (pages, seconds) in (("one job", one), ("parallelism 2", two)):
        print(f"  {name}: {pages} pages in {seconds:.2f} s = {pages / seconds:.1f} pages/s")
    verdict = "PASS" if single >= GOAL else "BELOW GOAL"
    print(f"ratio trawl/scrapy with latency {single:.3f} (goal >= {GOAL:.2f}): {verdict}")
    verdict = "PASS" if ratio >= PARALLEL_GOAL else "BELOW GOAL"
    print(f"ratio parallel trawl/scrapy with latency {ratio:.3f} (goal >= {PARALLEL_GOAL}): {verdict}")
    return {
        "latency_s": args.latency,
        "latency_scrapy_pages_per_s": round(scrapy_run.rate, 1),
        "latency_single_pages_per_s": round(one[0] / one[1], 1),
        "latency_single_ratio": round(single, 3),
        "latency_parallel_pages_per_s": round(two[0] / two[1], 1),
        "latency_parallel_ratio": round(ratio, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of A then B")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one crawl may take")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds each answer of the latency site takes")
    parser.add_argument("--latency-pages", type=int, default=2000, help="pages of the latency site")
    parser.add_argument("--single-only", action="store_true", help="skip the parallel, latency and kill measures")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"))
    args = parser.parse_args()
    exit_on_sigterm()
    try:
        with tempfile.TemporaryDirectory(prefix="trawl-bench-") as tmp, contextlib.ExitStack() as stack:
            summary = bench(args, Path(tmp), stack)
    except KeyboardInterrupt:
        print("\ninterrupted; every process this bench started has been stopped", file=sys.stderr)
        return 130
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
