"""Job log capture: what recording a record into a job's log costs, against Python logging with no output at all.

A worst case: a version at LOG_LEVEL DEBUG logs a line per request. --records records are logged back to back,
alternating A B A B for --rounds rounds:

- **A**: the records go through `logging` to a NullHandler (the cost of logging itself).
- **B**: the same records go to a JobLogCapture (formatting the line, keeping it), while a thread writes them to
  Redis every TRAWL_JOB_LOG_FLUSH_SECONDS as in a worker; the time includes the last write.

Prints records/s of each and B/A. Uses Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/10, started if
absent) under keys of its own, deleted at the end. The last line is a JSON summary.

    .venv/bin/python bench/joblog.py [--records 200000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import threading
import time
import uuid

from _common import exit_on_sigterm  # also puts the repository on sys.path

MESSAGE = "Crawled (200) <GET http://shop.example/p/%s> (referer: http://shop.example/list-%s.html)"


def log_records(handler: logging.Handler, records: int) -> float:
    logger = logging.getLogger(f"bench.joblog.{uuid.uuid4().hex[:6]}")
    logger.propagate, logger.level = False, logging.DEBUG
    logger.addHandler(handler)
    started = time.perf_counter()
    for number in range(records):
        logger.debug(MESSAGE, number, number // 20)
    return time.perf_counter() - started


def captured(records: int) -> float:
    from django.conf import settings

    from crawls.logs.joblog import job_log_forget, job_log_sink
    from runtime.bridge.logcapture import JobLogCapture

    job_id = f"bench-{uuid.uuid4().hex[:8]}"
    capture = JobLogCapture(sink=job_log_sink(job_id=job_id, attempt=1), level=logging.DEBUG)
    stop = threading.Event()

    def flush_every() -> None:
        while not stop.wait(settings.TRAWL_JOB_LOG_FLUSH_SECONDS):
            capture.flush_pending()

    flusher = threading.Thread(target=flush_every, daemon=True)
    flusher.start()
    started = time.perf_counter()
    log_records(capture, records)
    stop.set()
    flusher.join()
    capture.flush_pending()
    elapsed = time.perf_counter() - started
    job_log_forget(jobs=[(job_id, 1)])
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/10"))
    args = parser.parse_args()
    exit_on_sigterm()
    from project.redis.server import redis_start_if_absent

    server = redis_start_if_absent(args.redis_url, log_path=os.path.join(tempfile.gettempdir(), "bench-redis.log"))
    os.environ.update({"REDIS_URL": args.redis_url, "DJANGO_SETTINGS_MODULE": "project.settings"})
    import django

    django.setup()
    try:
        plain, capture = [], []
        for _ in range(args.rounds):
            plain.append(args.records / log_records(logging.NullHandler(), args.records))
            capture.append(args.records / captured(args.records))
            print(f"A logging only {plain[-1]:,.0f} records/s   B job log capture {capture[-1]:,.0f} records/s")
    finally:
        if server is not None:
            server.terminate()
    ratio = statistics.mean(capture) / statistics.mean(plain)
    print(f"capture/logging-only: {ratio:.2f} (records {args.records:,} per round, {args.rounds} rounds)")
    print(json.dumps({"bench": "joblog", "logging_only_per_s": plain, "capture_per_s": capture, "ratio": ratio}))


if __name__ == "__main__":
    main()
