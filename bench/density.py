"""Many throttled crawls at once (issue 42): --sites local sites of --pages pages each, every site limited to --rate
requests a second, crawled in one run by

- `scrapy`: plain Scrapy, one process, one spider whose start URLs are every site (Scrapy's own many-domain way:
  a download slot per host, DOWNLOAD_DELAY 1/rate, CONCURRENT_REQUESTS_PER_DOMAIN 1, AutoThrottle off, the
  broad-crawl DownloaderAwarePriorityQueue, CONCURRENT_REQUESTS = sites): the baseline of memory and CPU per page;
- `crawlers`: plain Scrapy, one `CrawlerProcess` with a crawler per site (as Trawl runs a crawler per job), same
  settings (CONCURRENT_REQUESTS 16 each);
- `trawl1`: today's Trawl, one crawl per process: a real worker with --processes pool processes
  (`TRAWL_CRAWLS_PER_PROCESS=1`), a job per site submitted at once through `job_create`;
- `trawlk`: Trawl with several crawls per process: a worker with --k-processes pool processes (the Procfile's
  `worker:` has 2) and `TRAWL_CRAWLS_PER_PROCESS` = sites ÷ processes; skipped on a checkout without that setting.

Every site is its own address on the loopback (127.x.y.z, one port, a fresh set per setup so no throttle bucket,
robots.txt or adaptive state carries over): Scrapy's download slots and Trawl's throttle both key on the host, not
the port. Trawl's throttle takes its rate from TRAWL_THROTTLE_DEFAULT_RATE with a burst of 1 (as Scrapy's delay).

Figures per setup, from the site server's log of every hit (its time and address) and psutil:
- pages/s: Σ over sites of (pages − 1) ÷ (last page − first page fetched, over all sites): `sites × rate` when every
  site is crawled at its rate, all at once; ÷ (sites × rate) is the share of the rate asked (goal ≥ 0.95);
- end to end: pages ÷ (last page − the jobs' submission, or Scrapy's process start);
- peak RSS summed over the crawl processes (every pool process and its children; Scrapy's process), sampled every
  0.1 s, and with the worker's main process;
- peak PSS of every process of the setup (the worker's main process included), sampled every second: a page that
  forked processes share counts once;
- CPU seconds per page over the crawl processes (Trawl: from its idle, warm pool to the last job ended; Scrapy: from
  its first crawler created to its reactor stopped);
- pages lost: a (site, page) the server never served, and jobs that did not succeed.

    .venv/bin/python bench/density.py [--sites 100] [--pages 20] [--rate 2] [--processes 20] [--k-processes 2]

PostgreSQL: --database-url (default BENCH_DENSITY_DATABASE_URL or postgres://postgres@127.0.0.1:5432/trawl_bench_density),
recreated at the start. The workers reach it through PgBouncer in transaction mode with --pgbouncer server connections
(20; 0: directly, as `make run` does), as docs/deploy.md sets a fleet up: a crawl process holds one connection per
crawl it runs, so 100 crawls at once would take all of a stock server's 100. The most server connections the database
had at once during each Trawl setup are printed. Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/4).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import psutil
from _common import (
    BASE_DIR,
    BENCH_DIR,
    BENCH_REDIS_URL,
    PYTHON,
    BusyCores,
    PeakRss,
    bench_run,
    served,
    spawn,
    stop,
    write_link_site,
)
from _density_report import hit_figures, report
from _setup import setup_django, start_worker, tail

MAXDEPTH = 20
SETUPS = ("scrapy", "crawlers", "trawl1", "trawlk")
DATABASE_URL = os.environ.get("BENCH_DENSITY_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/trawl_bench_density")


def addresses(setup: int, sites: int) -> list[str]:
    return [f"127.{20 + setup}.{number // 250}.{number % 250 + 1}" for number in range(sites)]


def tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """CPU of the processes and of their children already reaped (counted in their parent's children_* times)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def scrapy_settings(sites: int, rate: float, mode: str) -> dict:
    from _setup import scrapy_settings_args

    pairs = scrapy_settings_args()[1::2]  # Trawl's scalar Scrapy settings, as bench/crawl.py gives plain Scrapy
    settings = dict(pair.split("=", 1) for pair in pairs)
    settings |= {
        "DOWNLOAD_DELAY": 1 / rate,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "AUTOTHROTTLE_ENABLED": False,
        "LOG_FILE": "scrapy.log",
    }
    if mode == "spider":  # Scrapy's broad-crawl advice: a slot per host, the queue that picks the idlest slot
        settings |= {
            "CONCURRENT_REQUESTS": sites,
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        }
    return settings


def run_scrapy(args, tmp: Path, mode: str, setup: int) -> dict:
    hosts, hits = addresses(setup, args.sites), tmp / f"hits-{mode}.log"
    workdir = tmp / mode
    workdir.mkdir()
    with served(tmp / "site", hits=hits, hosts=hosts) as base:
        port = base.rsplit(":", 1)[1]
        (workdir / "urls.txt").write_text("\n".join(f"http://{host}:{port}/page-0.html" for host in hosts))
        settings = json.dumps(scrapy_settings(args.sites, args.rate, mode))
        command = [PYTHON, str(BENCH_DIR / "_density_scrapy.py"), "urls.txt", "result.json", settings]
        command += ["--mode", mode, "--maxdepth", str(MAXDEPTH)]
        started = time.monotonic()
        process = spawn(command, cwd=workdir, log_path=workdir / "out.log")
        try:
            pids = lambda: [p.pid for p in tree(process.pid)]  # noqa: E731
            with PeakRss(pids, interval=0.1) as rss, PeakRss(pids, interval=1.0, proportional=True) as pss:
                if process.wait(args.timeout):
                    log = tail(workdir / "out.log")
                    raise RuntimeError(f"plain Scrapy ({mode}) exited with {process.returncode}:\n{log}")
        finally:
            stop(process)
        result = json.loads((workdir / "result.json").read_text())
    figures = hit_figures(hits, hosts, args.pages, started)
    return figures | {
        "setup": mode,
        "processes": 1,
        "pages": result["pages"],
        "jobs_failed": 0,
        "peak_rss": rss.peak,
        "peak_rss_all": rss.peak,
        "peak_pss_all": pss.peak,
        "cpu_seconds": round(result["cpu_seconds"], 2),
    }


def settle(pid: int, timeout: float = 120) -> None:
    """Wait until the worker's pool processes have started and imported the crawl code (their RSS stops growing)."""
    last, deadline = -1, time.monotonic() + timeout
    while time.monotonic() < deadline:
        rss = sum(p.memory_info().rss for p in tree(pid) if p.is_running())
        if abs(rss - last) < 2**20:
            return
        last = rss
        time.sleep(1)


def connections(database: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database])
        return cursor.fetchone()[0] - 1  # not the bench's own


def run_trawl(args, tmp: Path, name: str, setup: int, processes: int, per: int) -> dict:
    from crawls.models import ACTIVE_STATUSES, CrawlJob
    from crawls.services import job_create

    hosts, hits = addresses(setup, args.sites), tmp / f"hits-{name}.log"
    with contextlib.ExitStack() as run, served(tmp / "site", hits=hits, hosts=hosts) as base:
        port = base.rsplit(":", 1)[1]
        env = {"TRAWL_CRAWLS_PER_PROCESS": str(per), **args.worker_database}
        worker = start_worker(tmp, run, concurrency=processes, env=env)
        settle(worker.pid)
        main = psutil.Process(worker.pid)
        pool = [p for p in tree(worker.pid) if p.pid != worker.pid]
        idle = sum(p.memory_info().rss for p in pool)
        cpu_before, main_before = cpu_seconds(tree(worker.pid)), sum(main.cpu_times()[:2])
        crawl_pids = lambda: [p.pid for p in tree(worker.pid) if p.pid != worker.pid]  # noqa: E731
        peak_connections = 0
        worker_pids = lambda: [p.pid for p in tree(worker.pid)]  # noqa: E731
        with (
            PeakRss(crawl_pids, interval=0.1) as rss,
            PeakRss(worker_pids, 0.1) as total,
            PeakRss(worker_pids, 1.0, proportional=True) as pss,
        ):
            started = time.monotonic()
            ids = [
                job_create(url=f"http://{host}:{port}/page-0.html", options={"maxdepth": MAXDEPTH}).pk for host in hosts
            ]
            deadline = started + args.timeout
            jobs = CrawlJob.objects.filter(pk__in=ids)
            while jobs.filter(status__in=ACTIVE_STATUSES).exists() and time.monotonic() < deadline:
                peak_connections = max(peak_connections, connections(args.database))
                time.sleep(0.5)
        cpu = cpu_seconds(tree(worker.pid)) - cpu_before
        main_cpu = sum(main.cpu_times()[:2]) - main_before
        stop(worker)
    outcomes = list(jobs.values_list("status", "stats"))
    failed = sum(status != "succeeded" for status, _ in outcomes)
    if failed:
        print(f"{name}: {failed} jobs did not succeed\n{tail(tmp / 'worker.log')}", file=sys.stderr)
    return hit_figures(hits, hosts, args.pages, started) | {
        "setup": name,
        "processes": processes,
        "crawls_per_process": per,
        "pages": sum((stats or {}).get("pages", 0) for _, stats in outcomes),
        "jobs_failed": failed,
        "peak_rss": rss.peak,
        "peak_rss_all": total.peak,
        "peak_pss_all": pss.peak,
        "idle_pool_rss": idle,
        "cpu_seconds": round(cpu - main_cpu, 2),
        "cpu_seconds_all": round(cpu, 2),
        "peak_db_connections": peak_connections,
    }


def prepare(args, tmp: Path) -> None:
    """Environment for this process and every worker, a fresh database, the site's pages."""
    import psycopg

    os.environ.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=args.database_url,
        REDIS_URL=args.redis_url,
        PYTHONPATH=str(BASE_DIR),
        TRAWL_THROTTLE_DEFAULT_RATE=str(args.rate),
        TRAWL_THROTTLE_DEFAULT_BURST="1",  # no burst: a token every 1/rate seconds, as Scrapy's DOWNLOAD_DELAY
        TRAWL_DEFAULT_MAX_ACTIVE_JOBS=str(max(100, args.sites)),
    )
    server, database = args.database_url.rsplit("/", 1)
    with psycopg.connect(f"{server.replace('postgres://', 'postgresql://')}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    setup_django()
    write_link_site(tmp / "site", pages=args.pages)


def supports_density() -> bool:
    from django.conf import settings

    return hasattr(settings, "TRAWL_CRAWLS_PER_PROCESS")


def bouncer(args, tmp: Path, stack: contextlib.ExitStack) -> dict:
    """The workers' database settings: through PgBouncer in transaction mode (at most --pgbouncer server connections;
    a crawl process holds one connection per crawl it runs), or, with --pgbouncer 0, directly."""
    if not args.pgbouncer:
        return {}
    from types import SimpleNamespace
    from urllib.parse import urlsplit

    from tests.fleet.services import PgBouncer

    server = SimpleNamespace(port=urlsplit(args.database_url).port or 5432)
    tmp.chmod(0o755)  # PgBouncer runs as the postgres user when we are root
    pool = PgBouncer(server, listen="127.0.0.1", root=tmp / "pgbouncer", pool=args.pgbouncer, database=args.database)
    stack.callback(pool.start().stop)
    return {"DATABASE_URL": pool.url, "TRAWL_DATABASE_POOLING": "transaction"}


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    prepare(args, tmp)
    args.worker_database = bouncer(args, tmp, stack)
    results = []
    for setup, name in enumerate(SETUPS):
        if name not in args.setups:
            continue
        if name == "trawlk" and not supports_density():
            print("trawlk: skipped, this checkout has no TRAWL_CRAWLS_PER_PROCESS", file=sys.stderr)
            continue
        with BusyCores() as busy:
            if name in ("scrapy", "crawlers"):
                result = run_scrapy(args, tmp, "spider" if name == "scrapy" else "crawlers", setup) | {"setup": name}
            elif name == "trawl1":
                result = run_trawl(args, tmp, name, setup, args.processes, 1)
            else:
                result = run_trawl(args, tmp, name, setup, args.k_processes, -(-args.sites // args.k_processes))
        results.append(result | {"machine_busy_cores": round(busy.cores, 2)})  # everyone's, this run's included
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        if args.keep:  # the hit logs and the worker's log, to look at per site afterwards
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in [*tmp.glob("hits-*.log"), tmp / "worker.log"]:
                if path.exists():
                    shutil.copy(path, args.keep / path.name)
    return report(results, args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=100)
    parser.add_argument("--pages", type=int, default=20, help="pages of each site")
    parser.add_argument("--rate", type=float, default=2.0, help="requests a second each site allows")
    parser.add_argument("--processes", type=int, default=20, help="pool processes of the one-crawl-per-process worker")
    parser.add_argument("--k-processes", type=int, default=2, help="pool processes of the K-crawls-per-process worker")
    parser.add_argument("--setups", default=",".join(SETUPS), help=f"comma-separated, of {', '.join(SETUPS)}")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one setup may take")
    parser.add_argument("--database-url", default=DATABASE_URL)
    parser.add_argument("--redis-url", default=BENCH_REDIS_URL)
    parser.add_argument("--keep", type=Path, help="copy the hit logs and the worker's log into this folder")
    parser.add_argument("--pgbouncer", type=int, default=20, help="PgBouncer's server connections (0: none)")
    args = parser.parse_args()
    args.setups, args.database = set(args.setups.split(",")), args.database_url.rsplit("/", 1)[1]
    return bench_run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
