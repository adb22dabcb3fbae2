"""Replay throughput: a version replaying a recorded job (no network, no throttle) ÷ the same version crawling the same
local site as a Trawl job on a real worker, in the same run (issue 44's goal: ≥ 1.5).

Each round records a crawl of a generated site of interlinked pages with the built-in `link` scraper (option
`record`), then replays that job with the same version (crawls.replays.runs, its child process). Crawl time is the
job's `duration` (claim → finished); replay time is the child's crawl (the crawler's start to its close, as the
report's `seconds`), and its wall time with the child's start-up and the diff is printed beside it. Every replay must
be clean and open no socket. The site has an unthrottled rule, as in bench/crawl.py: the crawl pays its Redis round
trips but never waits for a token.

    .venv/bin/python bench/replay.py [--pages 1500] [--rounds 2]

Uses Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/4, started if absent) and a throwaway SQLite file.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

from _common import BENCH_REDIS_URL, bench_run
from _setup import MAXDEPTH, bench_site, start_worker, tail

GOAL = 1.5


def crawl_recorded(url: str, timeout: float, tmp: Path):
    from crawls.models import ACTIVE_STATUSES, CrawlJob
    from crawls.services import job_create

    job = job_create(url=url, options={"maxdepth": MAXDEPTH, "record": True})
    deadline = time.monotonic() + timeout
    while job.status in ACTIVE_STATUSES and time.monotonic() < deadline:
        time.sleep(0.1)
        job = CrawlJob.objects.get(pk=job.pk)
    if job.status != "succeeded":
        raise RuntimeError(f"the recorded crawl ended {job.status}: {job.error_message}\n{tail(tmp / 'worker.log')}")
    return job


def replay_of(job, version: str):
    from crawls.replays.runs import job_replay_create, job_replay_run

    started = time.monotonic()
    replay = job_replay_run(replay=job_replay_create(job=job, version=version, publish=False))
    wall = time.monotonic() - started
    if replay.status != "clean":
        raise RuntimeError(f"the replay was {replay.status}: {replay.error or replay.report.get('summary')}")
    return replay, wall


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    url = bench_site(tmp, stack, redis_url=args.redis_url, pages=args.pages)
    start_worker(tmp, stack)
    crawls, replays, walls = [], [], []
    print(f"replay bench: {args.pages} pages at {url}, {args.rounds} round(s) of crawl (recorded) then replay")
    for number in range(1, args.rounds + 1):
        job = crawl_recorded(url, args.timeout, tmp)
        pages, seconds = job.stats["pages"], job.duration
        crawls.append(pages / seconds)
        replay, wall = replay_of(job, job.version.version)
        report = replay.report
        replays.append(report["pages"] / report["seconds"])
        walls.append(report["pages"] / wall)
        print(
            f"  round {number}: crawl {pages} pages in {seconds:.2f} s = {crawls[-1]:.0f} pages/s; "
            f"replay {report['pages']} pages in {report['seconds']:.2f} s = {replays[-1]:.0f} pages/s "
            f"({walls[-1]:.0f} pages/s with the child's start-up and the diff); sockets: {len(report['network'])}"
        )
    ratio = statistics.mean(replays) / statistics.mean(crawls)
    verdict = "meets" if ratio >= GOAL else "MISSES"
    print(
        f"replay ÷ crawl: {ratio:.2f} (goal ≥ {GOAL}: {verdict} it); with start-up: "
        f"{statistics.mean(walls) / statistics.mean(crawls):.2f}"
    )
    return {
        "bench": "replay",
        "pages": args.pages,
        "crawl_pages_per_s": round(statistics.mean(crawls), 1),
        "replay_pages_per_s": round(statistics.mean(replays), 1),
        "replay_wall_pages_per_s": round(statistics.mean(walls), 1),
        "ratio": round(ratio, 2),
        "goal": GOAL,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300, help="seconds one crawl may take")
    parser.add_argument("--redis-url", default=BENCH_REDIS_URL)
    args = parser.parse_args()
    return bench_run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
