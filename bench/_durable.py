"""bench/crawl.py's measures of durable, parallel crawls (the frontier in Redis).

(1) One job with `parallelism: 2` on a worker with two pool processes, against plain `scrapy runspider` measured in
    the same run (goal ≥ 1.7: faster than any single-process crawler).
(2) A 2,000-page crawl whose pool process is SIGKILLed halfway: pages the site served twice ÷ CONCURRENT_REQUESTS
    (goal ≤ 1). The reaper is called from here with a 3 s stale limit, so attempt 2 starts within seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from _common import served, write_link_site

PARALLEL_GOAL = 1.7
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

    from crawls.frontier import Frontier
    from crawls.services import job_create
    from crawls.services.reaper import jobs_reap

    hits = tmp / "kill-hits.log"
    start = write_link_site(tmp / "kill-site", pages=pages)
    with served(tmp / "kill-site", hits=hits) as base:
        unthrottle(base)
        job = job_create(url=base + start, options={"maxdepth": maxdepth})
        wait_job(job.pk, timeout=timeout, until=lambda _job: _count(hits) >= pages // 2)
        running = wait_job(job.pk, timeout=timeout, until=lambda j: j.status == "running" and j.worker)
        os.kill(int(running.worker.rsplit("/", 1)[-1]), signal.SIGKILL)
        killed_at = time.monotonic()
        in_flight = len(Frontier(job.pk).inflight_payloads())
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
