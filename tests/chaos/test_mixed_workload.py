"""Chaos under a mixed workload: a 2,001-page crawl at speed, a `parallelism: 2` crawl, a 20-job batch with a webhook
receiver and scheduled sources run on real worker processes, a real beat and a gunicorn web, while a driver on a fixed
seed (a) restarts Redis empty, (b) restarts Redis from its append-only file, (c) crashes PostgreSQL (immediate stop)
and starts it again, (d) SIGKILLs a crawl worker's pool process or the whole worker, (e) SIGKILLs the ops worker.

Redis (broker and state) and PostgreSQL are the driver's own, on free ports (never the machine's shared servers), so
the scenario runs in a process of its own (tests/chaos/mixed_driver.py; the shrunk periods are in tests/chaos/stack.py).
By default each fault strikes once; TRAWL_CHAOS_SOAK=1 runs three rounds, each submitting the workload again and
striking every fault once more (TRAWL_CHAOS_SEED picks the seed).

Fixed: the soak twice (seeds 30 and 7) ended a wide crawl `succeeded` 10-117 pages short of its site. Not the
frontier: PostgreSQL was in crash recovery while the throttle reloaded its rules from the database (every 15 s), the
OperationalError failed those downloads like a site's error and the frontier counted them done, never fetched. The
throttle now waits the database out, and a download failed by Trawl's own Redis or database stays in flight while the
crawl stops to be requeued (runtime/watch/outages.py; the focused regression test is tests/runtime/test_outages.py).

At the end: every job is final; no job succeeded without every page of its site fetched and stored as an item; no
item is stored twice; the batch's `batch.completed` arrived once; the web, both workers and beat are running (the
driver restarts only what it killed); every probe of the web got a 2xx or a 503. Recovery times are printed, never
asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.workers import BASE_DIR

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]

SOAK = os.environ.get("TRAWL_CHAOS_SOAK") == "1"
SEED = int(os.environ.get("TRAWL_CHAOS_SEED", "30"))


def run_driver(tmp_path) -> dict:
    command = [sys.executable, "-m", "tests.chaos.mixed_driver", "--seed", str(SEED), "--log-dir", str(tmp_path)]
    command += ["--rounds", "3" if SOAK else "1"]
    env = {**os.environ, "PYTHONPATH": str(BASE_DIR)}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(command, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=3300)
    lines = done.stdout.strip().splitlines()
    output = f"{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    assert done.returncode == 0 and lines, f"driver exited {done.returncode}\n{output}"
    return json.loads(lines[-1])


def recovery(fault: dict) -> str:
    if fault["idle"]:
        return "idle (every job already final)"
    return "never" if fault["recovery_seconds"] is None else f"{fault['recovery_seconds']}s"


def figures(report: dict) -> str:
    rows = [
        f"  {f['kind']:<13} at {f['at_seconds']:>6.1f}s ({f['pages_before']:>5} pages) down {f['down_seconds']:>4.1f}s,"
        f" recovered in {recovery(f)}: {f['detail']}"
        for f in report["faults"]
    ]
    statuses = sorted((job["kind"], job["status"], job["attempt"]) for job in report["jobs"])
    return "\n".join(
        [
            f"\nmixed chaos, seed {report['seed']}: {len(report['faults'])} faults, {report['elapsed']}s",
            *rows,
            f"  pages fetched twice: {report['twice']}",
            f"  jobs (kind, status, attempt): {dict(_count(statuses))}",
            f"  probes: {report['probes']}, batches: {report['batches']}, processes alive: {report['alive']}",
        ]
    )


def _count(items) -> dict:
    counts: dict = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def test_a_mixed_workload_survives_every_kind_of_fault_and_loses_nothing(tmp_path):
    report = run_driver(tmp_path)
    print(figures(report))
    logs = report["logs"]

    unfinished = [job for job in report["jobs"] if job["status"] not in FINAL]
    assert report["finished"], f"jobs still not final: {unfinished}\n{logs}"
    assert all(report["alive"].values()), f"a Trawl process is dead: {report['alive']}\n{logs}"
    assert report["bad_probes"] == [], report["bad_probes"]
    succeeded_short = [j for j in report["jobs"] if j["status"] == "succeeded" and j["missing_pages"]]
    assert succeeded_short == [], json.dumps(succeeded_short, indent=1)
    unstored = [j for j in report["jobs"] if j["status"] == "succeeded" and j["missing_items"]]
    assert unstored == [], json.dumps(unstored, indent=1)
    assert report["duplicate_items"] == 0
    assert report["batches"] == [{"status": "completed", "finished": True, "completed_events": 1}] * (3 if SOAK else 1)
    assert report["stray_events"] == 0
    assert all(job["status"] in FINAL for job in report["jobs"])


FINAL = ("succeeded", "failed", "cancelled", "dead")
