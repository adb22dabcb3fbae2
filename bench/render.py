"""Rendered-crawl throughput: a plain scrapy-playwright crawl (A) against the same crawl as a Trawl job with
`render: true` on a real worker (B), same local site, same Chromium (Debian's), same pages open at once.

A is `scrapy runspider bench/spiders/link.py -a render=1` with scrapy-playwright's handler on Chromium at
TRAWL_RENDER_CHROMIUM (the launch arguments Trawl uses), PLAYWRIGHT_MAX_PAGES_PER_CONTEXT = Trawl's
TRAWL_RENDER_MAX_PAGES; B is the `link` scraper with `render: true`, submitted without a requester (trusted: Chromium
connects directly); C is the same job for an ordinary requester under the private-target guard (allow-listing
127.0.0.0/8, the site's network), whose pages connect through the crawl's guard proxy
(runtime/rendering/proxy.py). All launch their browser inside the measured span (Trawl's closes with the job's
last context). Rounds alternate A B C A B C; time is crawl time as in bench/crawl.py.
Prints pages/s, Trawl/plain (goal >= 0.85), peak memory (PSS) of each side with its browser (Scrapy or the worker's pool
process, plus Playwright's driver and every Chromium process under it), and — for docs/rendering.md — the same Trawl
job without rendering, so the cost of a rendered page against a plain HTTP one. The last line is a JSON summary.

    .venv/bin/python bench/render.py [--pages 300] [--rounds 2]

Uses Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/4, started if absent) and a throwaway SQLite file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _common import BENCH_REDIS_URL, BusyCores, PeakRss, exit_on_sigterm, mib, running, spawn
from _setup import MAXDEPTH, PYTHON, SPIDER, Run, bench_site, scrapy_settings_args, start_worker, tail

GOAL = 0.85


def with_descendants(pids: list[int]) -> list[int]:
    """The processes and everything they started (Playwright's driver, Chromium and its renderers)."""
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found += [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    return found


class PeakPss(PeakRss):
    """PeakRss, but proportional set sizes: Chromium's processes share most of their pages, which RSS counts once per
    process (an 8-process browser would read as several GiB). Sampled less often: reading smaps is slow."""

    def __init__(self, pids) -> None:
        super().__init__(pids, interval=0.5)

    def _run(self) -> None:
        while not self._done.is_set():
            total = 0
            for pid in self.pids():
                with contextlib.suppress(psutil.Error):
                    total += psutil.Process(pid).memory_full_info().pss
            self.peak = max(self.peak, total)
            self._done.wait(self.interval)


def playwright_settings_args() -> list[str]:
    """scrapy-playwright on the Chromium, launch arguments and page bound Trawl's workers use."""
    from django.conf import settings

    from runtime.rendering.environment import chromium_args

    launch = {"executable_path": settings.TRAWL_RENDER_CHROMIUM, "headless": True, "args": chromium_args()}
    handlers = {scheme: "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler" for scheme in ("http", "https")}
    values = {
        "DOWNLOAD_HANDLERS": json.dumps(handlers),
        "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
        "PLAYWRIGHT_LAUNCH_OPTIONS": json.dumps(launch),
        "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": settings.TRAWL_RENDER_MAX_PAGES,
        # Trawl does not download images, fonts or media on a rendered page; the site has none, so this only keeps
        # the two handlers' routing alike (both route every request).
        "PLAYWRIGHT_ABORT_REQUEST": "playwright_abort.abort_skippable",
    }
    return [arg for name, value in values.items() for arg in ("-s", f"{name}={value}")]


def run_plain(url: str, tmp: Path, number: int, timeout: float) -> Run:
    stats_path, log_path = tmp / f"plain-{number}.json", tmp / f"plain-{number}.log"
    stats_path.unlink(missing_ok=True)
    command = [PYTHON, "-m", "scrapy", "runspider", str(SPIDER), "-a", f"url={url}", "-a", f"maxdepth={MAXDEPTH}"]
    command += ["-a", "render=1", "-a", f"stats_path={stats_path}"]
    command += [*scrapy_settings_args(), *playwright_settings_args()]
    env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with (
        BusyCores() as busy,
        running(spawn(command, cwd=tmp, log_path=log_path, env=env)) as process,
        PeakPss(lambda: with_descendants([process.pid])) as rss,
    ):
        if process.wait(timeout):
            raise RuntimeError(f"scrapy exited with {process.returncode}:\n{tail(log_path)}")
    stats = json.loads(stats_path.read_text())
    pages = stats.get("response_received_count", 0) - stats.get("robotstxt/response_count", 0)
    note = f"machine {busy.cores:.2f} CPUs busy"
    return Run("plain", pages, stats["bench/crawl_seconds"], stats["bench/crawl_cpu_seconds"], rss.peak, note)


def run_job(url: str, worker, tmp: Path, timeout: float, *, render: bool, guarded: bool = False) -> Run:
    from access.models import Requester
    from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
    from crawls.services import job_create

    requester = Requester.objects.get_or_create(name="bench-requester")[0] if guarded else None
    pool = [child.pid for child in psutil.Process(worker.pid).children()]
    with BusyCores() as busy, PeakPss(lambda: with_descendants(pool)) as rss:
        job = job_create(url=url, requester=requester, options={"maxdepth": MAXDEPTH, "render": render})
        deadline = time.monotonic() + timeout
        while job.status in ACTIVE_STATUSES and time.monotonic() < deadline:
            time.sleep(0.1)
            job = CrawlJob.objects.get(pk=job.pk)
    if job.status != JobStatus.SUCCEEDED:
        outcome = f"job {job.pk} {job.status} {job.error_class} {job.error_message}"
        raise RuntimeError(f"{outcome}\n{tail(tmp / 'worker.log')}")
    rendered = job.stats.get("render", {}).get("pages", 0)
    note = f"rendered {rendered}, machine {busy.cores:.2f} CPUs busy"
    engine = ("guarded" if guarded else "trawl") if render else "trawl-http"
    return Run(engine, job.stats["pages"], job.duration, 0.0, rss.peak, note)


def abort_module(tmp: Path) -> None:
    """PLAYWRIGHT_ABORT_REQUEST for the plain crawl: the resource types Trawl skips (runtime/rendering)."""
    (tmp / "playwright_abort.py").write_text(
        "def abort_skippable(request):\n    return request.resource_type in ('image', 'font', 'media')\n"
    )


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    # The guard on, the local site's network allow-listed: requester jobs (C) are guarded, requester-less ones not.
    os.environ.update(TRAWL_BLOCK_PRIVATE_TARGETS="1", TRAWL_PRIVATE_TARGETS_ALLOWED="127.0.0.0/8")
    url = bench_site(tmp, stack, redis_url=args.redis_url, pages=args.pages)
    abort_module(tmp)
    worker = start_worker(tmp, stack)
    rounds = f"{args.rounds} round(s) of A=scrapy-playwright B=trawl render C=guarded"
    print(f"render bench: {args.pages} pages at {url}, {rounds}")
    runs = []
    for number in range(1, args.rounds + 1):
        for run in (
            run_plain(url, tmp, number, args.timeout),
            run_job(url, worker, tmp, args.timeout, render=True),
            run_job(url, worker, tmp, args.timeout, render=True, guarded=True),
        ):
            runs.append(run)
            print(
                f"round {number} {run.engine:<6} {run.pages:>5} pages in {run.seconds:6.2f} s = {run.rate:6.1f}"
                f" pages/s, peak PSS {mib(run.peak_rss):>8} with its browser ({run.note})",
                flush=True,
            )
    http = run_job(url, worker, tmp, args.timeout, render=False)
    print(f"same job, not rendered: {http.pages} pages in {http.seconds:.2f} s = {http.rate:.1f} pages/s")
    return report(runs, http, args.pages)


def report(runs: list[Run], http: Run, pages: int) -> dict:
    engines = ("plain", "trawl", "guarded")
    mean = {engine: statistics.mean(run.rate for run in runs if run.engine == engine) for engine in engines}
    peak = {engine: max(run.peak_rss for run in runs if run.engine == engine) for engine in engines}
    ratio = mean["trawl"] / mean["plain"]
    guarded_ratio = mean["guarded"] / mean["plain"]
    per_page_ms = {"rendered": 1000 / mean["trawl"], "http": 1000 / http.rate}
    print()
    print(
        f"mean pages/s   A scrapy-playwright {mean['plain']:7.1f}   B trawl render {mean['trawl']:7.1f}"
        f"   C guarded (proxy) {mean['guarded']:7.1f}"
    )
    print(f"peak PSS       A {mib(peak['plain']):>8}   B {mib(peak['trawl']):>8}   (process + driver + Chromium)")
    verdict = "PASS" if ratio >= GOAL else "BELOW GOAL"
    print(f"ratio trawl/scrapy-playwright {ratio:.3f} (goal >= {GOAL:.2f}): {verdict}")
    print(f"ratio guarded/scrapy-playwright {guarded_ratio:.3f}; guarded/trusted {mean['guarded'] / mean['trawl']:.3f}")
    print(
        f"a rendered page costs {per_page_ms['rendered']:.1f} ms of crawl time against {per_page_ms['http']:.1f} ms"
        f" over HTTP: x{http.rate / mean['trawl']:.1f}"
    )
    if any(run.pages != pages for run in runs):
        print(f"warning: not every run fetched all {pages} pages")
    return {
        "bench": "render",
        "pages": pages,
        "plain_pages_per_s": [round(run.rate, 1) for run in runs if run.engine == "plain"],
        "trawl_pages_per_s": [round(run.rate, 1) for run in runs if run.engine == "trawl"],
        "guarded_pages_per_s": [round(run.rate, 1) for run in runs if run.engine == "guarded"],
        "ratio": round(ratio, 3),
        "guarded_ratio": round(guarded_ratio, 3),
        "goal": GOAL,
        "pass": ratio >= GOAL,
        "plain_peak_pss_mib": round(peak["plain"] / 2**20, 1),
        "trawl_peak_pss_mib": round(peak["trawl"] / 2**20, 1),
        "http_pages_per_s": round(http.rate, 1),
        "rendered_ms_per_page": round(per_page_ms["rendered"], 1),
        "http_ms_per_page": round(per_page_ms["http"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--redis-url", default=BENCH_REDIS_URL)
    args = parser.parse_args()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="trawl-bench-render-") as tmp, contextlib.ExitStack() as stack:
        summary = bench(args, Path(tmp), stack)
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(main())
