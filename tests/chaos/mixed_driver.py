"""The mixed-workload chaos scenario, run in a process of its own (`python -m tests.chaos.mixed_driver --seed N`):
it starts a private PostgreSQL cluster and Redis server, points Django, the web, the workers and beat at them, submits
the workload, breaks things on a fixed seed while the work runs, lets it finish, and prints what it saw as one JSON
line (the test asserts on it). A process of its own because pytest-django's database is the shared server's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from tests.chaos.harness import ChaosRedis, PrivatePostgres, Prober

FINISH_LIMIT = 900  # seconds for every job to end after the last fault; the test fails past it, with the logs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=1, help="workloads submitted, each struck by every fault")
    parser.add_argument("--log-dir", type=Path, required=True)
    args = parser.parse_args()
    postgres = PrivatePostgres().create()
    redis = ChaosRedis(args.log_dir).start()
    try:
        os.environ.update(DATABASE_URL=postgres.url, REDIS_URL=redis.url, DJANGO_SETTINGS_MODULE="project.settings")
        # As tests/settings.py: the local sites have no throttle rule, and the big crawl is meant to run at speed.
        os.environ.update(TRAWL_THROTTLE_DEFAULT_RATE="200", TRAWL_THROTTLE_DEFAULT_BURST="200")
        import django

        django.setup()
        report = run(args.seed, args.rounds, args.log_dir, redis, postgres)
    finally:
        redis.stop()
        postgres.destroy()
    (args.log_dir / "report.json").write_text(json.dumps(report, indent=1))  # for a post-mortem next to the logs
    print(json.dumps(report), flush=True)


def run(seed: int, rounds: int, root: Path, redis, postgres) -> dict:
    from access.services import token_issue
    from tests.chaos.faults import KINDS, Chaos
    from tests.chaos.stack import Stack, schema_and_schedule

    rng = random.Random(seed)
    schema_and_schedule()
    requester, token = token_issue(requester_name="chaos")
    stack = Stack(root)
    prober = None
    try:
        stack.start()
        started, chaos = time.monotonic(), Chaos(stack, redis, postgres, rng, time.monotonic())
        for round_ in range(rounds):  # each round: the workload again, and every kind of fault once, in random order
            stack.submit(requester, round_=round_)
            if prober is None:
                big_job = next(job_id for job_id, kind in stack.jobs.items() if kind == "big")
                prober = Prober(stack.web.url, ["/healthz", f"/api/jobs/{big_job}/"], token=token)
                prober.start()
            first_at = rng.randint(100, 300)
            _wait(lambda first_at=first_at: stack.big_hits() >= first_at, limit=240)
            for kind in rng.sample(KINDS, len(KINDS)):
                chaos.inject(kind)
                time.sleep(rng.uniform(1.0, 3.0))
        finished = _wait(_all_final, limit=FINISH_LIMIT)
        _wait(lambda: all(_batch_done(pk) for pk in stack.batch_ids) and _completed(stack), limit=180)
        time.sleep(5)  # a duplicate `batch.completed` would arrive now
        prober.stop()
        alive = stack.alive()
        return {
            "seed": seed,
            "faults": [vars(fault) for fault in chaos.faults],
            "finished": finished,
            "elapsed": round(time.monotonic() - started, 1),
            "alive": alive,
            "probes": dict(prober.answers),
            "bad_probes": prober.bad[:20],
            **outcome(stack),
            "logs": stack.logs() if not finished or not all(alive.values()) else "",
        }
    finally:
        if prober is not None:
            prober.stop()
        stack.stop()


def _wait(predicate, *, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # the database restarting under the driver's own query: ask again
            from django.db import connection

            connection.close()
        time.sleep(0.2)
    return False


def _all_final() -> bool:
    from crawls.models import CrawlJob
    from tests.chaos.faults import FINAL

    return not CrawlJob.objects.exclude(status__in=FINAL).exists()


def _completed(stack) -> bool:
    return len(stack.receiver.events("batch.completed")) >= len(stack.batch_ids)


def _batch_done(batch_id) -> bool:
    from crawls.models import Batch

    return Batch.objects.get(pk=batch_id).finished_at is not None


def outcome(stack) -> dict:
    """Every job with its site's pages fetched or missed, pages fetched twice, duplicate items, the batch's end."""
    from django.db.models import Count

    from crawls.models import Batch, CrawlJob
    from items.models import Item

    jobs, twice = [], Counter()
    for job in CrawlJob.objects.select_related("source").order_by("queued_at", "id"):
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(job.url))
        kind, site = stack.sites[origin]
        pages = {f"/{path.name}" for path in site.root.glob("*.html")}
        fetched = {path for path in site.hits if path in pages}
        stored = set(Item.objects.filter(url__startswith=origin).values_list("url", flat=True))
        twice[kind] += sum(count - 1 for path, count in site.hits.items() if path in pages and count > 1)
        jobs.append(
            {
                "id": str(job.pk),
                "kind": kind,
                "status": job.status,
                "attempt": job.attempt,
                "error": f"{job.error_class}: {job.error_message[:200]}",
                "pages": len(pages),
                "missing_pages": sorted(pages - fetched)[:10],
                "missing_items": sorted({f"{origin}{path}" for path in pages} - stored)[:10],
            }
        )
    keys = ("tenant", "scraper", "fingerprint")
    dupes = Item.objects.values(*keys).annotate(rows=Count("id")).filter(rows__gt=1).count()
    dupes += Item.objects.values("tenant", "scraper", "url").annotate(rows=Count("id")).filter(rows__gt=1).count()
    completed = Counter(event.json["data"]["id"] for event in stack.receiver.events("batch.completed"))
    batches = [
        {"status": batch.status, "finished": bool(batch.finished_at), "completed_events": completed[str(batch.pk)]}
        for batch in Batch.objects.filter(pk__in=stack.batch_ids)
    ]
    return {
        "jobs": jobs,
        "twice": dict(twice),
        "duplicate_items": dupes,
        "batches": batches,
        "stray_events": sum(completed.values()) - sum(batch["completed_events"] for batch in batches),
    }


if __name__ == "__main__":
    main()
