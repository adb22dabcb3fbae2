"""Batches: a 1,000-job batch (one chord) against the same 1,000 jobs submitted one by one (no chord).

Everything runs for real on this machine: a generated local site served from its own process, gunicorn serving the
REST API, a crawl worker and an ops worker (control + callbacks), and a webhook receiver in this process. Each job
fetches one page with the `link` scraper; the site gets a throttle rule that never runs dry. Measured:

- submission latency: `POST /api/batches/` with 1,000 job specs until its 201 (the chord is built by a launcher
  task afterwards, so this is validation + inserts);
- callback lag: from the last job's `finished_at` to `batch.completed` arriving at the receiver (chord counting,
  `finalize_batch`, the delivery task, the signed POST);
- total time: submission start → `batch.completed`, against submission start → last `finished_at` for the same
  jobs posted one by one to `POST /api/jobs/` (which has no completion signal: the caller would have to poll).

    .venv/bin/python bench/batch.py [--jobs 1000] [--processes 8]

Uses Redis at BENCH_BATCH_REDIS_URL (default redis://127.0.0.1:6379/9, started if absent) and a throwaway SQLite file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _common import BASE_DIR, PYTHON, exit_on_sigterm, running, served, spawn, write_link_site


class Receiver:
    """Records when each webhook arrives (wall clock, to compare with the jobs' finished_at)."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, dict]] = []
        self.done = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                receiver.arrivals.append((time.time(), body))
                self.send_response(204)
                self.end_headers()
                if body.get("event") == "batch.completed":
                    receiver.done.set()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def setup_django(tmp: Path, redis_url: str) -> dict[str, str]:
    env = {
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
        "REDIS_URL": redis_url,
        "PYTHONPATH": str(BASE_DIR),
        "TRAWL_BATCH_MAX_JOBS": "100000",
    }
    os.environ.update(env)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, check=True)
    import django

    django.setup()
    return {**os.environ, **env}


def unthrottle(url: str) -> None:
    """A throttle rule for the site that never runs dry: this measures orchestration, not politeness."""
    from urllib.parse import urlsplit

    from throttling.services import throttle_create

    huge = 1_000_000
    throttle_create(domain=urlsplit(url).hostname, rate=huge, burst=huge, ip_rate=huge, ip_burst=huge, concurrency=huge)


def refuse_shared_broker(redis_url: str) -> None:
    """Workers of another Trawl on this Redis database would take our tasks (and we theirs): refuse to measure."""
    from project.celery import app

    others = [name for reply in app.control.ping(timeout=1.0) or [] for name in reply]
    if others:
        raise SystemExit(f"{redis_url} already has Trawl workers ({', '.join(others)}); pick a free Redis database")


def start_worker(tmp: Path, env: dict[str, str], queues: str, concurrency: int) -> subprocess.Popen:
    from project.celery import app

    name = f"trawl-bench-{queues.split(',')[0]}-{uuid.uuid4().hex[:6]}"
    command = [PYTHON, "-m", "project.worker", "-Q", queues, "-c", str(concurrency)]
    command += ["-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "WARNING"]
    process = spawn(command, cwd=BASE_DIR, env=env, log_path=tmp / f"{name}.log")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None:
        if app.control.ping(destination=[f"{name}@{os.uname().nodename}"], timeout=0.5):
            return process
    process.kill()
    raise RuntimeError(f"worker {name} did not answer; see {tmp}")


def start_web(tmp: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [PYTHON, "-m", "gunicorn", "project.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2", "--timeout", "120"]
    process = spawn(command, cwd=BASE_DIR, env=env, log_path=tmp / "web.log")
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"{base}/healthz", timeout=2)
            return process, base
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not start; see {tmp / 'web.log'}")


def post(url: str, token: str, body: dict) -> tuple[float, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Token {token}"},
        method="POST",
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=300) as response:
        payload = json.loads(response.read())
    return time.monotonic() - started, payload


def wait_jobs_ended(job_ids: list[str], timeout: float) -> float:
    """Poll until every job has ended; return the latest finished_at (unix time)."""
    from crawls.models import ACTIVE_STATUSES, CrawlJob

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not CrawlJob.objects.filter(pk__in=job_ids, status__in=ACTIVE_STATUSES).exists():
            latest = CrawlJob.objects.filter(pk__in=job_ids).order_by("-finished_at").first()
            return latest.finished_at.timestamp()
        time.sleep(0.25)
    raise RuntimeError("jobs did not all end in time")


def run_batch(base: str, token: str, urls: list[str], receiver: Receiver, timeout: float) -> dict:
    from crawls.models import CrawlJob

    started = time.time()
    latency, created = post(f"{base}/api/batches/", token, {"callback_url": receiver.url, "jobs": urls})
    if not receiver.done.wait(timeout):
        raise RuntimeError("batch.completed did not arrive in time")
    arrived, payload = next((at, body) for at, body in receiver.arrivals if body["event"] == "batch.completed")
    last_finished = max(job.finished_at.timestamp() for job in CrawlJob.objects.filter(batch_id=created["id"]))
    return {
        "submit_s": latency,
        "callback_lag_s": arrived - last_finished,
        "total_s": arrived - started,
        "totals": payload["data"]["totals"],
    }


def run_one_by_one(base: str, token: str, urls: list[dict], timeout: float) -> dict:
    started = time.time()
    ids, latencies = [], []
    for spec in urls:
        latency, job = post(f"{base}/api/jobs/", token, spec)
        ids.append(job["id"])
        latencies.append(latency)
    submitted = time.time() - started
    last_finished = wait_jobs_ended(ids, timeout)
    return {"submit_s": submitted, "mean_post_s": sum(latencies) / len(latencies), "total_s": last_finished - started}


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    from project.redis.server import redis_start_if_absent

    write_link_site(tmp / "site", pages=args.jobs)
    site = stack.enter_context(served(tmp / "site"))
    redis = redis_start_if_absent(args.redis_url, log_path=str(tmp / "redis.log"))
    if redis is not None:
        stack.enter_context(running(redis))
    env = setup_django(tmp, args.redis_url)
    refuse_shared_broker(args.redis_url)
    from access.services import token_issue

    _, token = token_issue(requester_name="bench")
    unthrottle(site)
    web, base = start_web(tmp, env)
    stack.enter_context(running(web))
    stack.enter_context(running(start_worker(tmp, env, "control,callbacks", 2)))
    stack.enter_context(running(start_worker(tmp, env, "crawls", args.processes), timeout=40))
    receiver = Receiver()
    specs = [{"url": f"{site}/page-{n}.html"} for n in range(args.jobs)]
    print(f"batch bench: {args.jobs} one-page jobs, crawl worker of {args.processes} processes, {os.cpu_count()} CPUs")
    chord = run_batch(base, token, specs, receiver, args.timeout)
    print(
        f"A batch (chord)  submit {chord['submit_s']:.2f} s   last job -> batch.completed"
        f" {chord['callback_lag_s']:.2f} s   total {chord['total_s']:.1f} s   totals {chord['totals']}",
        flush=True,
    )
    single = run_one_by_one(base, token, specs, args.timeout)
    print(
        f"B one by one     {args.jobs} POSTs {single['submit_s']:.1f} s (mean {1000 * single['mean_post_s']:.0f} ms)"
        f"   total to last finished {single['total_s']:.1f} s",
        flush=True,
    )
    ratio = chord["total_s"] / single["total_s"]
    print(f"total time batch/one-by-one {ratio:.2f}")
    return {
        "bench": "batch",
        "jobs": args.jobs,
        "processes": args.processes,
        "batch_submit_s": round(chord["submit_s"], 3),
        "batch_callback_lag_s": round(chord["callback_lag_s"], 3),
        "batch_total_s": round(chord["total_s"], 2),
        "one_by_one_submit_s": round(single["submit_s"], 2),
        "one_by_one_total_s": round(single["total_s"], 2),
        "ratio_total": round(ratio, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=min(8, os.cpu_count() or 1), help="crawl worker processes")
    parser.add_argument("--timeout", type=float, default=900, help="seconds each half may take")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_BATCH_REDIS_URL", "redis://127.0.0.1:6379/9"))
    args = parser.parse_args()
    exit_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="trawl-bench-batch-") as tmp, contextlib.ExitStack() as stack:
        summary = bench(args, Path(tmp), stack)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
