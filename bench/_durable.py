"""bench/crawl.py's measures of durable, parallel crawls (the frontier in Redis).

(1) One job with `parallelism: 2` on a worker with two pool processes, against two plain `scrapy runspider` crawls of
    the same site at once, each of half its pages (what each shard of the job crawls), measured in the same run
    (goal ≥ 0.90 of that pair: the most two crawling processes get from this machine); also against one plain Scrapy
    crawl (≥ 1.7 would be faster than any single process).
(2) A 2,000-page crawl whose pool process is SIGKILLed halfway: pages the site served twice ÷ CONCURRENT_REQUESTS
    (goal ≤ 1). The reaper is called from here with a 3 s stale limit, so attempt 2 starts within seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from _common import BusyCores, served, write_link_site
from _setup import GOAL, MAXDEPTH, run_scrapy, run_scrapy_pair, start_worker, tail, unthrottle

PARALLEL_GOAL = 0.90  # issue 33: a parallelism-2 job's pages/s ÷ two plain Scrapy processes crawling at once
SPEEDUP_GOAL = 1.7  # a parallelism-2 job's pages/s ÷ one plain Scrapy process's
REFETCH_GOAL = 1.0


@dataclass
class KillResult:
    pages: int
    twice: int
    never: int
    in_flight_at_kill: int
    attempts: int
    handover_seconds: float
    concurrent_requests: int

    @property
    def ratio(self) -> float:
        return self.twice / self.concurrent_requests


def wait_job(job_id, *, timeout: float, until=lambda job: False):
    from crawls.models import ACTIVE_STATUSES, CrawlJob

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = CrawlJob.objects.get(pk=job_id)
        if job.status not in ACTIVE_STATUSES or until(job):
            return job
        time.sleep(0.1)
    raise RuntimeError(f"job {job_id} still {job.status} after {timeout:.0f} s")


def run_job(url: str, *, maxdepth: int, timeout: float, tail, parallelism: int = 2) -> tuple[int, float]:
    """One job with `parallelism` shards; (pages, crawl seconds claim → finished)."""
    from crawls.services import job_create

    job = job_create(url=url, options={"maxdepth": maxdepth}, parallelism=parallelism)
    job = wait_job(job.pk, timeout=timeout)
    if job.status != "succeeded":
        raise RuntimeError(f"job {job.pk} (parallelism {parallelism}) {job.status} {job.error_message}\n{tail()}")
    return job.stats["pages"], job.duration


def run_killed(tmp: Path, *, pages: int, maxdepth: int, timeout: float, tail, unthrottle) -> KillResult:
    """Crawl a fresh site with a request log; SIGKILL the crawling pool process halfway; let attempt 2 finish."""
    from django.conf import settings

    from crawls.services import job_create
    from crawls.services.reaper import jobs_reap
    from crawls.services.shards import job_frontier

    hits = tmp / "kill-hits.log"
    start = write_link_site(tmp / "kill-site", pages=pages)
    with served(tmp / "kill-site", hits=hits) as base:
        unthrottle(base)
        job = job_create(url=base + start, options={"maxdepth": maxdepth})
        wait_job(job.pk, timeout=timeout, until=lambda _job: _count(hits) >= pages // 2)
        running = wait_job(job.pk, timeout=timeout, until=lambda j: j.status == "running" and j.worker)
        os.kill(int(running.worker.rsplit("/", 1)[-1]), signal.SIGKILL)
        killed_at = time.monotonic()
        in_flight = len(job_frontier(job.pk).inflight_payloads())
        served_at_kill = _count(hits)
        while True:  # the reaper, as beat would run it (stale after 3 s here)
            jobs_reap()
            if _count(hits) > served_at_kill + 1:
                handover = time.monotonic() - killed_at
                break
            if time.monotonic() - killed_at > timeout:
                raise RuntimeError(f"attempt 2 never started\n{tail()}")
            time.sleep(0.2)
        job = wait_job(job.pk, timeout=timeout)
        if job.status != "succeeded":
            raise RuntimeError(f"killed job {job.pk} {job.status} {job.error_message}\n{tail()}")
    counts = Counter(line for line in hits.read_text().splitlines() if line.startswith("/page-"))
    concurrency = int(settings.TRAWL_SCRAPY_SETTINGS["CONCURRENT_REQUESTS"])
    return KillResult(
        pages=len(counts),
        twice=sum(1 for count in counts.values() if count > 1),
        never=pages - len(counts),
        in_flight_at_kill=in_flight,
        attempts=job.attempt,
        handover_seconds=handover,
        concurrent_requests=concurrency,
    )


def _count(hits: Path) -> int:
    with contextlib.suppress(FileNotFoundError):
        return sum(1 for line in hits.read_text().splitlines() if line.startswith("/page-"))
    return 0


def durable(args: argparse.Namespace, url: str, tmp: Path, stack: contextlib.ExitStack, *, single: dict) -> dict:
    """The parallel and kill measures; `single` is the single-job summary (plain Scrapy's rate and CPU use)."""
    # Heartbeats every second, so the bench's reaper (3 s) finds the killed crawl at once and no live one.
    start_worker(tmp, stack, concurrency=2, env={"TRAWL_HEARTBEAT_SECONDS": "1"})
    log = lambda: tail(tmp / "worker.log")  # noqa: E731
    print()
    pair_rates, rates, busy_cores = [], [], []
    for number in range(1, args.rounds + 1):  # a pair, then the job (the worker idles meanwhile)
        # Each of the pair crawls as many pages as each shard of the job: the job's 2,000 pages are 1,000 per shard,
        # and a crawl's fixed costs (opening, the slow start, the last requests) weigh more on a shorter one.
        pair_rate, pair_busy = run_scrapy_pair(url, tmp, args.timeout, pages_each=args.pages // 2)
        pair_rates.append(pair_rate)
        print(
            f"round {number} two plain Scrapy crawls at once, {args.pages // 2} pages each: {pair_rate:.1f} pages/s"
            " together,"
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
    print(f"ratio parallel trawl / one plain Scrapy crawl {parallel:.3f}")
    verdict = "PASS" if parallel / ceiling >= PARALLEL_GOAL else "BELOW GOAL"
    print(
        f"ratio parallel trawl / two plain Scrapy crawls at once {parallel / ceiling:.3f} (goal >= {PARALLEL_GOAL}):"
        f" {verdict}"
    )
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
    verdict = "PASS" if ratio >= SPEEDUP_GOAL else "BELOW GOAL"
    print(f"ratio parallel trawl/scrapy with latency {ratio:.3f} (goal >= {SPEEDUP_GOAL}): {verdict}")
    return {
        "latency_s": args.latency,
        "latency_scrapy_pages_per_s": round(scrapy_run.rate, 1),
        "latency_single_pages_per_s": round(one[0] / one[1], 1),
        "latency_single_ratio": round(single, 3),
        "latency_parallel_pages_per_s": round(two[0] / two[1], 1),
        "latency_parallel_ratio": round(ratio, 3),
    }
