"""Flat memory for big crawls: the items between the reactor and the task thread are bounded (ITEM_QUEUE_MAX), so a
crawl faster than its database waits instead of buffering. One page yields N items (tests' ManyItemsSpider); the
task thread drains 200 items per tick and takes 10 ms per chunk (a database that falls behind). Measured per run:
peak RSS above the process's RSS before the crawl, and the most items ever waiting. Runs 10,000 and 100,000 items
with the bound, and 100,000 without it (the baseline: what the queue did before), each in a fresh process.

    .venv/bin/python bench/item_queue.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from _common import BASE_DIR, PYTHON


def child(count: int, bounded: bool) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    import psutil

    import runtime.bridge.runner as runner
    from tests.fixtures.spiders import ManyItemsSpider

    if not bounded:
        runner.ITEM_QUEUE_MAX = 0  # queue.Queue(0): unbounded, as before
    server = ThreadingHTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    process, done, peak, most = psutil.Process(), threading.Event(), [0], [0]

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.05)

    def tick(session) -> str:
        most[0] = max(most[0], session.items.qsize())
        session.drain(200)
        time.sleep(0.01)
        return ""

    url = f"http://127.0.0.1:{server.server_address[1]}/"
    before = process.memory_info().rss
    threading.Thread(target=sample, daemon=True).start()
    runner.run_spider(
        spider_cls=ManyItemsSpider,
        settings={"LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False},
        spider_kwargs={"url": url, "start_urls": [url], "config": {"count": count}},
        timeout=900,
        on_tick=tick,
        tick_seconds=0.05,
    )
    done.set()
    return {
        "items": count,
        "bounded": bounded,
        "peak_growth_mib": round((peak[0] - before) / 2**20, 1),
        "most_waiting": most[0],
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]), sys.argv[3] == "bounded")))
        return
    rows = []
    for count, mode in ((10_000, "bounded"), (100_000, "bounded"), (100_000, "unbounded")):
        out = subprocess.run(
            [PYTHON, __file__, "--child", str(count), mode],
            cwd=BASE_DIR,
            env={**os.environ, "PYTHONPATH": str(BASE_DIR)},
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], file=sys.stderr)
    small, big, before = rows
    summary = {
        "benchmark": "item_queue",
        "runs": rows,
        "growth_100k_vs_10k": round(big["peak_growth_mib"] / max(small["peak_growth_mib"], 0.1), 2),
        "growth_bounded_vs_unbounded_100k": round(big["peak_growth_mib"] / max(before["peak_growth_mib"], 0.1), 2),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
