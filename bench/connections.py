"""PostgreSQL connections of many crawls at once through PgBouncer: N real crawls (real Celery worker processes, a
crawl each) against a private PostgreSQL with `max_connections` 100, every Trawl process connected through PgBouncer
in transaction mode (pool 40), as docs/deploy.md sets a fleet up.

Prints the most server connections PostgreSQL had at once (sampled every 0.1 s; goal: at most 50), the client
connections PgBouncer held at once, whether every job succeeded and every page was fetched (nothing lost), and, as
the baseline of the same run, the connections the same crawls would have needed without PgBouncer: one per crawl
process (its task's) plus each worker's main process.

    .venv/bin/python bench/connections.py [--crawls 200] [--per-worker 50] [--pages 10]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import BASE_DIR, PYTHON, running, served, spawn, write_link_site

sys.path.insert(0, str(BASE_DIR))

from tests.chaos.harness import PrivatePostgres
from tests.fleet.services import BridgeRedis, PgBouncer, server_connections

POOL = 40


def bouncer_clients(bouncer: PgBouncer) -> int:
    import psycopg

    url = bouncer.url.replace("postgres://", "postgresql://").rsplit("/", 1)[0] + "/pgbouncer"
    with psycopg.connect(url, autocommit=True) as admin:
        return sum(1 for row in admin.execute("SHOW CLIENTS").fetchall() if row[2] == "trawl")


class Peak(threading.Thread):
    def __init__(self, sample) -> None:
        super().__init__(daemon=True)
        self.sample, self.peak, self.done = sample, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            try:
                self.peak = max(self.peak, self.sample())
            except Exception:  # a sample lost to a busy moment: the next one counts
                continue


SUBMIT = """
import json, sys, django
django.setup()
from crawls.models import CrawlJob
from crawls.services.jobs import job_create
from registry.builtins import builtins_ensure
builtins_ensure()
base, crawls = sys.argv[1], int(sys.argv[2])
ids = [str(job_create(url=f"{base}/c{n}/page-0.html", options={"maxdepth": 20}).pk) for n in range(crawls)]
print(json.dumps(ids))
"""

STATUS = """
import json, sys, django
django.setup()
from django.db.models import Count
from crawls.models import CrawlJob
print(json.dumps(dict(CrawlJob.objects.values_list("status").annotate(n=Count("id")))))
"""


def python(script: str, *args: str, env: dict) -> str:
    import subprocess

    done = subprocess.run([PYTHON, "-c", script, *args], cwd=BASE_DIR, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return (done.stdout.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crawls", type=int, default=200)
    parser.add_argument("--per-worker", type=int, default=50, help="crawl processes per worker (prefork -c)")
    parser.add_argument("--pages", type=int, default=10, help="pages of each crawl's site")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="trawl-connections-"))
    tmp.chmod(0o755)
    for n in range(args.crawls):  # one site per crawl under /c<n>/: its links made relative so they stay there
        write_link_site(tmp / "site" / f"c{n}", pages=args.pages)
        for page in (tmp / "site" / f"c{n}").glob("*.html"):
            page.write_text(page.read_text().replace('href="/page-', 'href="page-'))
    postgres = PrivatePostgres(max_connections=100).create()
    try:
        bouncer = PgBouncer(postgres, listen="127.0.0.1", root=tmp / "pgbouncer", pool=POOL).start()
        redis = BridgeRedis(listen="127.0.0.1", root=tmp).start()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "PYTHONPATH": str(BASE_DIR),
            "REDIS_URL": redis.url(0),
            "CELERY_RESULT_BACKEND": redis.url(1),
            "DATABASE_URL": bouncer.url,
            "TRAWL_DATABASE_POOLING": "transaction",
            # One site on 127.0.0.1 stands for N sites: its rule must not be what limits the crawls.
            "TRAWL_THROTTLE_DEFAULT_RATE": "1000",
            "TRAWL_THROTTLE_DEFAULT_BURST": "1000",
            "TRAWL_THROTTLE_DEFAULT_CONCURRENCY": "1000",
        }
        direct = {**env, "DATABASE_URL": postgres.url, "TRAWL_DATABASE_POOLING": ""}
        python(
            "import django; django.setup(); from django.core.management import call_command; "
            "call_command('migrate', verbosity=0)",
            env=direct,
        )
        hits = tmp / "hits.log"
        with served(tmp / "site", hits=hits, delay=0.3) as base:
            workers = -(-args.crawls // args.per_worker)
            command = [
                PYTHON,
                "-m",
                "project.worker",
                "-Q",
                "crawls",
                "-c",
                str(args.per_worker),
                "--without-gossip",
                "--without-mingle",
                "-l",
                "WARNING",
            ]
            processes = [
                spawn([*command, "-n", f"bench{n}@%h"], log_path=tmp / f"worker{n}.log", cwd=BASE_DIR, env=env)
                for n in range(workers)
            ]
            servers, clients = Peak(lambda: server_connections(postgres)), Peak(lambda: bouncer_clients(bouncer))
            servers.start()
            clients.start()
            started = time.monotonic()
            ids = json.loads(python(SUBMIT, base, str(args.crawls), env=env))
            deadline = time.monotonic() + 1800
            while time.monotonic() < deadline:
                counts = json.loads(python(STATUS, env=env))
                if counts.get("succeeded", 0) + counts.get("failed", 0) + counts.get("dead", 0) >= len(ids):
                    break
                time.sleep(2)
            seconds = time.monotonic() - started
            servers.done.set()
            clients.done.set()
            for process in processes:
                with running(process):
                    pass
        fetched = set(hits.read_text().split())
        expected = {f"/c{n}/page-{i}.html" for n in range(args.crawls) for i in range(args.pages)}
        row = {
            "benchmark": "connections",
            "crawls": args.crawls,
            "crawl_processes": workers * args.per_worker,
            "jobs": counts,
            "pages_missing": len(expected - fetched),
            "seconds": round(seconds, 1),
            "postgres_max_connections": 100,
            "pgbouncer_pool": POOL,
            "peak_server_connections": servers.peak,
            "peak_pgbouncer_clients": clients.peak,
            "baseline_connections_without_pgbouncer": workers * args.per_worker + workers,
        }
        print(
            f"{args.crawls} crawls in {seconds:.0f} s ({counts}), {row['pages_missing']} pages missing: at most "
            f"{servers.peak} PostgreSQL connections (goal ≤ 50; without PgBouncer the same processes need "
            f"{row['baseline_connections_without_pgbouncer']}), {clients.peak} PgBouncer clients",
            file=sys.stderr,
        )
        print(json.dumps(row))
        bouncer.stop()
        redis.stop()
    finally:
        postgres.destroy()


if __name__ == "__main__":
    main()
