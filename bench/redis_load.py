"""Redis load of crawling: N simulated crawl processes, each on its own connection, make the Redis calls Trawl's crawl
code makes — per page: the throttle's token take (throttling/buckets.py) and one frontier commit that queues the
page's links, writes its item ahead, takes the page out of flight and takes the next request (runtime/frontier/);
per tick (a second): the cancel poll (crawls/live/cancel.py), the progress write (crawls/live/progress.py), the job
log's write (runtime/bridge/joblog.py), the frontier's `stored` for the items the tick flushed, and the lease renewal
(every lease/3 s, here every tick: an upper bound). Calls go through those modules' Python API, not copies of their Lua.

Measured on a private redis-server (a free port, nobody else's commands in its counters): Redis calls per page
(INFO commandstats), Redis CPU per page (used_cpu_sys + used_cpu_user), hence the pages/s one primary carries at
100 % of a core, and the primaries 1,000 crawl processes need at --pages-per-second each.

    .venv/bin/python bench/redis_load.py [--processes 20] [--pages-per-second 10] [--seconds 20] [--links 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import threading
import time
import uuid

from _common import BASE_DIR

TARGET_PROCESSES = 1000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def crawl_process(*, stop: threading.Event, pages_per_second: float, links: int, pages: list[int]) -> None:
    """One crawl's Redis calls until `stop`, at `pages_per_second` (each thread takes its own pooled connection)."""
    from crawls.live.cancel import cancel_requested
    from crawls.live.progress import progress_store
    from crawls.logs.joblog import job_log_sink
    from crawls.services.shards import job_frontier
    from project.redis import get_redis
    from throttling.services import throttle_buckets

    job_id, client, buckets = uuid.uuid4(), get_redis(), throttle_buckets()
    frontier, log = job_frontier(job_id), job_log_sink(job_id=job_id, attempt=1)
    frontier.open()
    frontier.commit(requests=[(b"GET http://shop.test/", 50, uuid.uuid4().bytes)])
    taken = frontier.commit(take=1).taken
    done, tick_started, flushed = 0, time.monotonic(), 0
    while not stop.is_set():
        host = f"shop{done % 7}.test"
        buckets.take(client, host=host, egress="", holder=str(job_id))
        found = [(f"GET http://{host}/p/{uuid.uuid4().hex}".encode(), 50, uuid.uuid4().bytes) for _ in range(links)]
        taken = frontier.commit(requests=found, items=[b'{"url": "http://shop.test/p"}'], done=taken, take=1).taken
        done += 1
        if time.monotonic() - tick_started >= 1:
            cancel_requested(job_id=job_id)
            progress_store(job_id=job_id, stats={"pages": done, "items": done})
            log.write([f"INFO crawled {done} pages"])
            frontier.stored(done - flushed, progress={"pages": done})
            frontier.renew()
            flushed, tick_started = done, time.monotonic()
        time.sleep(max(0.0, 1 / pages_per_second - 0.0005))
    pages.append(done)


def redis_counters(client) -> tuple[int, float]:
    """All commands Redis ran (EVALSHA counts once, the commands inside its script too) and its CPU seconds."""
    stats, cpu = client.info("commandstats"), client.info("cpu")
    calls = sum(value["calls"] for key, value in stats.items() if not key.startswith("cmdstat_info"))
    return calls, cpu["used_cpu_sys"] + cpu["used_cpu_user"]


def script_calls(client) -> int:
    """Scripts run (EVALSHA and EVAL): each is one round trip of crawl code, whatever it runs inside."""
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))


def run(args: argparse.Namespace) -> dict:
    import django

    django.setup()
    from project.redis import get_redis

    client = get_redis()
    stop, pages, threads = threading.Event(), [], []
    for _ in range(args.processes):
        kwargs = {"stop": stop, "pages_per_second": args.pages_per_second, "links": args.links, "pages": pages}
        threads.append(threading.Thread(target=crawl_process, kwargs=kwargs, daemon=True))
    for thread in threads:
        thread.start()
    time.sleep(2)  # every process past its opening calls
    client.config_resetstat()
    calls_before, cpu_before = redis_counters(client)
    started = time.monotonic()
    time.sleep(args.seconds)
    calls_after, cpu_after = redis_counters(client)
    scripts = script_calls(client)
    elapsed = time.monotonic() - started
    stop.set()
    for thread in threads:
        thread.join()
    total_pages = sum(pages) * args.seconds / (elapsed + 2)  # pages in the measured window (a steady rate)
    cpu_per_page = (cpu_after - cpu_before) / total_pages
    per_primary = 1 / cpu_per_page
    needed = TARGET_PROCESSES * args.pages_per_second / per_primary
    return {
        "processes": args.processes,
        "pages_per_second_each": args.pages_per_second,
        "pages_measured": round(total_pages),
        "script_calls_per_page": round(scripts / total_pages, 2),
        "redis_commands_per_page": round((calls_after - calls_before) / total_pages, 2),
        "redis_cpu_us_per_page": round(cpu_per_page * 1e6, 1),
        "pages_per_second_per_primary": round(per_primary),
        "primaries_for_1000_processes": math.ceil(needed),
        "primaries_for_1000_processes_at_half_a_core": math.ceil(needed * 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument("--pages-per-second", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--links", type=int, default=5, help="links each page queues")
    args = parser.parse_args()
    from project.redis.server import redis_start_if_absent

    url = f"redis://127.0.0.1:{free_port()}/0"
    server = redis_start_if_absent(url)
    # A fixed installation id: the bench needs no database, only the keys the crawl code names.
    os.environ.update(REDIS_URL=url, DJANGO_SETTINGS_MODULE="project.settings", TRAWL_INSTALLATION_ID="0bench00")
    sys.path.insert(0, str(BASE_DIR))
    try:
        row = run(args)
    finally:
        if server is not None:
            server.terminate()
    print(
        f"{row['processes']} crawl processes at {row['pages_per_second_each']} pages/s: "
        f"{row['script_calls_per_page']} script calls in {row['redis_commands_per_page']} Redis commands a page, "
        f"{row['redis_cpu_us_per_page']} µs of Redis CPU a page -> {row['pages_per_second_per_primary']:,} pages/s "
        f"a primary at 100 % of a core; 1,000 processes need {row['primaries_for_1000_processes']} primaries "
        f"({row['primaries_for_1000_processes_at_half_a_core']} at 50 %)",
        file=sys.stderr,
    )
    print(json.dumps({"benchmark": "redis_load", **row}))


if __name__ == "__main__":
    main()
