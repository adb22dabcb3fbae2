"""Packaged versions: crawl rate of a spider uploaded as a wheel (A, child process of its own environment) against the
same spider installed in the worker (B, in-process), and how long after an upload its first job runs.

One real worker (`-c 1`) crawls a generated local site; rounds alternate B A B A, each scraper with its own items so
both pay the same write path (new in round 1, unchanged after). The packaged spider is Trawl's `link` spider
subclassed in a wheel built here (`benchlink.spiders.LinkSpider`): the same code, run through the child process.
Rates are pages / job duration (claimed → finished). Prints the ratio packaged/in-process (goal ≥ 0.90 once the
environment is built) and, for the upload, seconds from upload to `ready` (environment built, spider imported in it)
and from `ready` to the first job started and finished; the last line is a JSON summary.

    .venv/bin/python bench/packages.py [--pages 2000] [--rounds 2]

Uses Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/4, started if absent) and throwaway directories.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

from _common import BENCH_REDIS_URL, bench_run, running, served, stop, write_link_site
from _setup import setup_django, start_worker, tail, unthrottle, use_bench_environment

GOAL = 0.90
MAXDEPTH = 50
LINK_SPIDER = "runtime.spiders.link.LinkSpider"
WHEEL_SPIDER = "benchlink.spiders.LinkSpider"
LINK_MODULE = '''from runtime.spiders.link import LinkSpider as InstalledLinkSpider


class LinkSpider(InstalledLinkSpider):
    """Trawl's link spider, shipped in a wheel."""
'''


def package_environment(tmp: Path) -> None:
    """Before Trawl is imported (project.env reads these once): this run's environment cache. The wheel goes to the
    package storage, the run's database by default, which its worker shares."""
    os.environ.update(
        TRAWL_PACKAGE_CACHE_DIR=str(tmp / "package-envs"),
        TRAWL_PACKAGE_NO_INDEX="1",  # the wheel needs nothing Trawl does not have: never ask the internet
    )


def register(tmp: Path) -> tuple[float, str]:
    """The in-process scraper, then the packaged one by upload. Returns when the upload happened and its version."""
    from registry.services import scraper_create, version_create
    from registry.services.packages import version_upload
    from tests.packages import wheel_build

    version_create(scraper=scraper_create(name="bench_inproc"), version="1.0.0", spider=LINK_SPIDER, is_default=True)
    wheel = wheel_build(
        tmp / "wheel",
        name="benchlink",
        version="1.0.0",
        files={"benchlink/__init__.py": "", "benchlink/spiders.py": LINK_MODULE},
    )
    uploaded = time.monotonic()
    with open(wheel, "rb") as handle:
        version_upload(
            scraper=scraper_create(name="bench_packaged"),
            package=handle,
            filename=wheel.name,
            version="1.0.0",
            spider=WHEEL_SPIDER,
            is_default=True,
        )
    return uploaded, "1.0.0"


def wait_ready(timeout: float, tmp: Path) -> float:
    from registry.models import ScraperVersion

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        version = ScraperVersion.objects.get(scraper__name="bench_packaged")
        if version.package_status == "ready":
            return time.monotonic()
        if version.package_status == "failed":
            raise RuntimeError(f"the package failed to build:\n{version.package_log}")
        time.sleep(0.05)
    raise RuntimeError(f"the package was not built within {timeout} s:\n{tail(tmp / 'worker.log')}")


def run_job(scraper: str, url: str, timeout: float, tmp: Path, *, maxdepth: int = MAXDEPTH):
    from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
    from crawls.services import job_create

    job = job_create(url=url, scraper=scraper, options={"maxdepth": maxdepth})
    deadline = time.monotonic() + timeout
    while job.status in ACTIVE_STATUSES and time.monotonic() < deadline:
        time.sleep(0.05)
        job = CrawlJob.objects.get(pk=job.pk)
    if job.status != JobStatus.SUCCEEDED:
        raise RuntimeError(
            f"{scraper} job {job.status} {job.error_class} {job.error_message}\n{tail(tmp / 'worker.log')}"
        )
    return job


def one_page_seconds(scraper: str, url: str, timeout: float, tmp: Path) -> float:
    submitted = time.monotonic()
    run_job(scraper, url, timeout, tmp, maxdepth=0)
    return time.monotonic() - submitted


def cold_machine_first_job(worker, url: str, timeout: float, tmp: Path, stack: contextlib.ExitStack) -> float:
    """Another machine that never built the environment: a new worker with an empty cache builds it (under its lock)
    before its first job of the version."""
    stop(worker)
    os.environ["TRAWL_PACKAGE_CACHE_DIR"] = str(tmp / "package-envs-cold")
    start_worker(tmp, stack)
    seconds = one_page_seconds("bench_packaged", url, timeout, tmp)
    print(f"\nfirst packaged job on a machine without its environment, submit -> finished (1 page): {seconds:6.2f} s")
    return seconds


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    use_bench_environment(tmp, args.redis_url)
    package_environment(tmp)
    from project.redis.server import redis_start_if_absent

    start_path = write_link_site(tmp / "site", pages=args.pages)
    url = stack.enter_context(served(tmp / "site")) + start_path
    redis = redis_start_if_absent(args.redis_url, log_path=str(tmp / "redis.log"))
    if redis is not None:
        stack.enter_context(running(redis))
    setup_django()
    unthrottle(url)
    worker = start_worker(tmp, stack)
    print(f"packages bench: {args.pages} pages at {url}, {args.rounds} round(s) of B=in-process A=packaged\n")

    uploaded, _ = register(tmp)
    ready = wait_ready(args.timeout, tmp)
    # One page each: the delay, not the crawl. The in-process job, submitted the same way, is the baseline.
    first = one_page_seconds("bench_packaged", url, args.timeout, tmp)
    baseline = one_page_seconds("bench_inproc", url, args.timeout, tmp)
    print(f"upload -> ready (environment built, spider imported):  {ready - uploaded:6.2f} s")
    print(f"first packaged job, submit -> finished (1 page):        {first:6.2f} s")
    print(f"an in-process job, submit -> finished (1 page):         {baseline:6.2f} s\n")

    rates: dict[str, list[float]] = {"in-process": [], "packaged": []}
    for number in range(1, args.rounds + 1):
        for engine, scraper in (("in-process", "bench_inproc"), ("packaged", "bench_packaged")):
            job = run_job(scraper, url, args.timeout, tmp)
            rate = job.stats["pages"] / job.duration
            rates[engine].append(rate)
            print(
                f"round {number} {engine:<10} {job.stats['pages']:>5} pages in {job.duration:6.2f} s"
                f" = {rate:6.1f} pages/s"
            )
    cold = cold_machine_first_job(worker, url, args.timeout, tmp, stack)
    mean = {engine: statistics.mean(values) for engine, values in rates.items()}
    ratio = mean["packaged"] / mean["in-process"]
    print(f"\nmean pages/s  in-process {mean['in-process']:7.1f}   packaged {mean['packaged']:7.1f}")
    print(f"ratio packaged/in-process {ratio:.3f} (goal >= {GOAL:.2f}): {'PASS' if ratio >= GOAL else 'BELOW GOAL'}")
    return {
        "bench": "packages",
        "pages": args.pages,
        "in_process_pages_per_s": [round(rate, 1) for rate in rates["in-process"]],
        "packaged_pages_per_s": [round(rate, 1) for rate in rates["packaged"]],
        "ratio": round(ratio, 3),
        "goal": GOAL,
        "pass": ratio >= GOAL,
        "upload_to_ready_s": round(ready - uploaded, 2),
        "first_packaged_job_s": round(first, 2),
        "in_process_job_s": round(baseline, 2),
        "cold_machine_first_job_s": round(cold, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of in-process then packaged")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one crawl or build may take")
    parser.add_argument("--redis-url", default=BENCH_REDIS_URL)
    args = parser.parse_args()
    return bench_run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
