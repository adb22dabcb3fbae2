"""Redis load of crawling: N simulated crawl processes, each on its own connection, make the Redis calls Trawl's crawl
code makes, through those modules' Python API (never copies of their Lua), against throttle rules really loaded:

- per page: the throttle's token take with the holder's in-flight slot (throttling/buckets.py), the slot's release
  when the response is in (throttling/slots.lua; a crawl now sends most with its next take: this bench keeps the
  heavier pattern), one frontier commit that queues the page's links, writes its item ahead, takes the page out of
  flight and takes the next request (runtime/frontier/);
- every OBSERVE_SECONDS per host: the adaptive controller's observation (throttling/controller.py);
- per tick (a second): the cancel poll, the progress write, the job log's write, the frontier's `stored` and lease
  renewal, the slots' renewal.

The rules (one DomainThrottle row per simulated site, in a throwaway SQLite database) are mirrored into Redis by
`throttle_rules_load`, as a worker does when a take says "stale"; the bench counts the takes' answers, so a run where
takes came back stale (and measured nothing of the bucket's real work) says so.

Measured on a private redis-server (a free port, nobody else's commands in its counters): Redis calls and CPU per
page, hence the pages/s one primary carries at 100 % of a core and the primaries 1,000 crawl processes need; then
each script alone (`INFO commandstats`' EVALSHA time over a burst of that script only): µs per call.

    .venv/bin/python bench/redis_load.py [--processes 20] [--pages-per-second 10] [--seconds 20] [--links 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter

from _common import BASE_DIR

TARGET_PROCESSES = 1000
SITES = 50  # simulated sites, each with its rule; processes crawl them round robin


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def site(n: int) -> str:
    return f"shop{n % SITES}.bench.test"


def crawl_process(*, stop: threading.Event, pages_per_second: float, links: int, pages: list, answers: Counter):
    """One crawl's Redis calls until `stop`, at `pages_per_second`."""
    from crawls.live.cancel import cancel_requested
    from crawls.live.progress import progress_store
    from crawls.logs.joblog import job_log_sink
    from crawls.services.shards import job_frontier
    from project.redis import get_redis
    from throttling.controller import OBSERVE_SECONDS, Observed
    from throttling.services import throttle_buckets, throttle_controller, throttle_rules_load
    from throttling.slots import SCRIPT as SLOTS

    job_id, client, buckets = uuid.uuid4(), get_redis(), throttle_buckets()
    controller, holder = throttle_controller(), f"bench-{uuid.uuid4().hex[:8]}"
    frontier, log = job_frontier(job_id), job_log_sink(job_id=job_id, attempt=1)
    frontier.open()
    frontier.commit(requests=[(b"GET http://shop.bench.test/", 50, uuid.uuid4().bytes)])
    taken = frontier.commit(take=1).taken
    done, tick_started, flushed, observed_at = 0, time.monotonic(), 0, time.monotonic()
    seen: dict[str, Observed] = {}
    while not stop.is_set():
        host = site(done)
        decision = buckets.take(client, host=host, egress="bench", holder=holder)
        answers[decision.status] += 1
        if decision.status == "stale":
            throttle_rules_load()
        if decision.status == "granted":  # the response is in: its in-flight slot goes back
            slots_key = buckets.slots_key(buckets.slots_domain(host, decision))
            SLOTS.run(client, [slots_key], [holder, "release", decision.granted, buckets.slot_lease])
        seen.setdefault(host, Observed()).add(latency=0.05, error=False)
        found = [(f"GET http://{host}/p/{uuid.uuid4().hex}".encode(), 50, uuid.uuid4().bytes) for _ in range(links)]
        item = [b'{"url": "http://shop.bench.test/p"}']
        taken = frontier.commit(requests=found, items=item, done=taken, take=1).taken
        done += 1
        if controller is not None and time.monotonic() - observed_at >= OBSERVE_SECONDS:
            for name, observed in seen.items():
                controller.observe(client, host=name, observed=observed)
            seen, observed_at = {}, time.monotonic()
        if time.monotonic() - tick_started >= 1:
            cancel_requested(job_id=job_id)
            progress_store(job_id=job_id, stats={"pages": done, "items": done})
            log.write([f"INFO crawled {done} pages"])
            frontier.stored(done - flushed, progress={"pages": done})
            frontier.renew()
            SLOTS.run(client, [buckets.slots_key(site(done))], [holder, "renew", 0, buckets.slot_lease])
            flushed, tick_started = done, time.monotonic()
        time.sleep(max(0.0, 1 / pages_per_second - 0.0005))
    pages.append(done)


def redis_counters(client) -> tuple[int, float, int]:
    """Commands Redis ran (a script's own commands included), its CPU seconds, and scripts run (EVALSHA/EVAL)."""
    stats, cpu = client.info("commandstats"), client.info("cpu")
    calls = sum(value["calls"] for key, value in stats.items() if not key.startswith("cmdstat_info"))
    scripts = sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))
    return calls, cpu["used_cpu_sys"] + cpu["used_cpu_user"], scripts


def script_costs(client, calls: int = 2000) -> dict[str, float]:
    """µs of Redis time per call of each script alone: a burst of that script, EVALSHA's usec over its calls."""
    from crawls.services.shards import job_frontier
    from throttling.controller import Observed
    from throttling.services import throttle_buckets, throttle_controller
    from throttling.slots import SCRIPT as SLOTS

    buckets, controller = throttle_buckets(), throttle_controller()
    frontier = job_frontier(uuid.uuid4())
    frontier.open()
    frontier.commit(requests=[(f"GET http://a/{n}".encode(), 50, uuid.uuid4().bytes) for n in range(calls + 1)])
    state = {"taken": frontier.commit(take=1).taken}

    def commit(n: int) -> None:
        state["taken"] = frontier.commit(done=state["taken"], take=1, items=[b"{}"]).taken

    bursts = {
        "throttle take": lambda n: buckets.take(client, host=site(n), egress="bench", holder="costs"),
        "slot release": lambda n: SLOTS.run(
            client, [buckets.slots_key(site(n))], ["costs", "release", 1, buckets.slot_lease]
        ),
        "controller observation": lambda n: controller.observe(
            client, host=site(n), observed=Observed().add(latency=0.05, error=False)
        ),
        "frontier commit": commit,
    }
    costs = {}
    for name, call in bursts.items():
        client.config_resetstat()
        for n in range(calls):
            call(n)
        evalsha = client.info("commandstats").get("cmdstat_evalsha", {})
        costs[name] = round(evalsha.get("usec", 0) / max(1, evalsha.get("calls", 1)), 1)
    return costs


def database_with_rules(folder: str) -> None:
    """A throwaway SQLite database holding one rule per simulated site (generous: the bench measures Redis, not
    waiting), and the rules mirrored into Redis as a worker mirrors them."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from throttling.models import DomainThrottle
    from throttling.services import throttle_rules_load

    for n in range(SITES):
        DomainThrottle.objects.create(domain=site(n), rate=1000, burst=1000, ip_rate=1000, ip_burst=1000)
    assert throttle_rules_load(), "the rules were not loaded"


def run(args: argparse.Namespace) -> dict:
    from project.redis import get_redis

    client = get_redis()
    stop, pages, answers, threads = threading.Event(), [], Counter(), []
    for _ in range(args.processes):
        kwargs = {"stop": stop, "pages_per_second": args.pages_per_second, "links": args.links}
        threads.append(threading.Thread(target=crawl_process, kwargs={**kwargs, "pages": pages, "answers": answers}))
    for thread in threads:
        thread.start()
    time.sleep(2)  # every process past its opening calls
    client.config_resetstat()
    answers.clear()
    calls_before, cpu_before, _ = redis_counters(client)
    started = time.monotonic()
    time.sleep(args.seconds)
    calls_after, cpu_after, scripts = redis_counters(client)
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
        "take_answers": dict(answers),
        "script_calls_per_page": round(scripts / total_pages, 2),
        "redis_commands_per_page": round((calls_after - calls_before) / total_pages, 2),
        "redis_cpu_us_per_page": round(cpu_per_page * 1e6, 1),
        "pages_per_second_per_primary": round(per_primary),
        "primaries_for_1000_processes": math.ceil(needed),
        "primaries_for_1000_processes_at_half_a_core": math.ceil(needed * 2),
        "us_per_script_call": script_costs(client),
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
    folder = tempfile.mkdtemp(prefix="trawl-redis-load-")
    os.environ.update(
        REDIS_URL=url,
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=f"sqlite:///{folder}/bench.sqlite3",
        TRAWL_INSTALLATION_ID="0bench00",
    )
    sys.path.insert(0, str(BASE_DIR))
    try:
        database_with_rules(folder)
        row = run(args)
    finally:
        if server is not None:
            server.terminate()
    print(
        f"{row['processes']} crawl processes at {row['pages_per_second_each']} pages/s, takes {row['take_answers']}: "
        f"{row['script_calls_per_page']} script calls in {row['redis_commands_per_page']} Redis commands a page, "
        f"{row['redis_cpu_us_per_page']} µs of Redis CPU a page -> {row['pages_per_second_per_primary']:,} pages/s "
        f"a primary at 100 % of a core; 1,000 processes need {row['primaries_for_1000_processes']} primaries "
        f"({row['primaries_for_1000_processes_at_half_a_core']} at 50 %); µs per call: {row['us_per_script_call']}",
        file=sys.stderr,
    )
    print(json.dumps({"benchmark": "redis_load", **row}))


if __name__ == "__main__":
    main()
