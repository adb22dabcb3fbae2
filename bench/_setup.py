"""The set-up bench/crawl.py, bench/render.py and bench/packages.py share: a served site of linked pages, a throwaway
SQLite database and the bench Redis, Django, a real Celery worker, plain Scrapy's settings, and a run's figures."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from _common import BASE_DIR, BENCH_DIR, PYTHON, BusyCores, PeakRss, running, served, spawn, write_link_site

GOAL = 0.90  # a job's pages/s ÷ plain Scrapy's, one process each
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
    import logging

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


def run_scrapy(url: str, tmp: Path, number: int, timeout: float, pages: int | None = None) -> Run:
    """Plain `scrapy runspider` of the site, or of its first `pages` pages (CLOSESPIDER_PAGECOUNT)."""
    from runtime.bridge.outcome import job_stats

    stats_path, log_path = tmp / f"scrapy-{number}.json", tmp / f"scrapy-{number}.log"
    stats_path.unlink(missing_ok=True)  # a crawl that failed to write its stats must not be read as an earlier one
    command = [PYTHON, "-m", "scrapy", "runspider", str(SPIDER), "-a", f"url={url}", "-a", f"maxdepth={MAXDEPTH}"]
    command += ["-a", f"stats_path={stats_path}", *scrapy_settings_args()]
    if pages is not None:
        command += ["-s", f"CLOSESPIDER_PAGECOUNT={pages}"]
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


def run_scrapy_pair(url: str, tmp: Path, timeout: float, pages_each: int | None = None) -> tuple[float, float]:
    """Two plain Scrapy crawls of the site at once, each of its first `pages_each` pages if given (a parallel job's
    share per shard: the same work per process on both sides): (pages/s together, CPUs busy). Two processes that
    share nothing but the machine: the most two crawling processes get out of it, whatever they are."""
    with BusyCores() as busy, ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(run_scrapy, url, tmp, n, timeout, pages_each) for n in (91, 92)]
        runs = [future.result() for future in futures]
    # From the first crawl's start to the last one's end: neither gets credit for the other's start-up.
    span = max(run.span[1] for run in runs) - min(run.span[0] for run in runs)
    return sum(run.pages for run in runs) / span, busy.cores


def start_worker(
    tmp: Path, stack: contextlib.ExitStack, ready_timeout: float = 60, concurrency: int = 1, env: dict | None = None
) -> subprocess.Popen:
    from project.celery import app

    name = f"trawl-bench-{uuid.uuid4().hex[:8]}"
    command = [PYTHON, "-m", "project.worker", "-Q", "crawls,control,callbacks"]
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


def tail(path: Path, lines: int = 40) -> str:
    with contextlib.suppress(FileNotFoundError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def bench_site(tmp: Path, stack: contextlib.ExitStack, *, redis_url: str, pages: int) -> str:
    """Everything a crawl bench needs before its first crawl: the environment, a served site of `pages` linked pages,
    the bench Redis (started if absent), the migrated database, an unthrottled rule for the site. Returns the start
    URL; what it started stops with `stack`."""
    use_bench_environment(tmp, redis_url)
    from project.redis.server import redis_start_if_absent

    start_path = write_link_site(tmp / "site", pages=pages)
    url = stack.enter_context(served(tmp / "site")) + start_path
    redis = redis_start_if_absent(redis_url, log_path=str(tmp / "redis.log"))
    if redis is not None:
        stack.enter_context(running(redis))
    setup_django()
    unthrottle(url)
    return url
