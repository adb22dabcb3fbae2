"""Field history's cost: storing a re-crawl of a 10,000-item catalog where 3 % of the items changed, with the field
history on (TRAWL_ITEM_CHANGES_MAX, its default) ÷ with it off (0: whole-item change detection only), in the same run
(issue 45's goal: ≤ 1.3).

Two catalogs of the same items are stored once (not timed), one per side, each its own scraper and source. Then each
round re-crawls both, the sides alternating which goes first: the same 3 % of items (a different 3 % every round)
get a new price, every other field as before; the items go chunk by chunk (TRAWL_ITEM_CHUNK) through the real
`items_upsert`, as a crawl stores them, each chunk its own transaction. The time is the sum of the chunks' upserts,
and, with the history, of keeping each changed item's bound as the job ends (`job_history_prune`).

    .venv/bin/python bench/changes.py [--items 10000] [--changed-pct 3] [--rounds 5] [--database-url URL]

Uses a throwaway SQLite file unless --database-url names a PostgreSQL database (its tables are created and emptied
of the bench's rows), and Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379/4, started if absent).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

from _common import BENCH_REDIS_URL, bench_run
from _setup import setup_django, use_bench_environment

GOAL = 1.3
SIDES = ("with_history", "without_history")


def catalog(count: int, *, step: int, round_number: int) -> list[dict]:
    """The catalog as a crawl sees it in a round: item n's price went up by one in every round r with r ≡ n (mod
    `step`), so each round moves one item in `step` (a different one each round) and leaves the others as they were."""
    return [
        {
            "url": f"https://shop.test/p/{n}",
            "sku": f"SKU-{n:06d}",
            "title": f"Product {n}",
            "price": f"{10 + n % 90 + sum(1 for r in range(1, round_number + 1) if r % step == n % step)}.99",
            "currency": "EUR",
            "description": f"Product {n}: a sturdy thing. " * 8,
            "specs": {"colour": ("red", "green", "blue")[n % 3], "size": n % 7},
        }
        for n in range(count)
    ]


def store(side: dict, items: list[dict], *, history: bool) -> float:
    """Seconds to store `items` as one job of the side's source, chunk by chunk."""
    from django.conf import settings

    from crawls.models import CrawlJob
    from items.history.record import job_history_prune
    from items.services import items_upsert

    settings.TRAWL_ITEM_CHANGES_MAX = side["changes_max"] if history else 0
    job = CrawlJob.objects.create(url=side["source"].url, scraper=side["scraper"], source=side["source"])
    chunk, seconds = settings.TRAWL_ITEM_CHUNK, 0.0
    for start in range(0, len(items), chunk):
        began = time.perf_counter()
        items_upsert(
            job_id=job.pk,
            scraper_id=side["scraper"].pk,
            tenant_id=side["tenant"],
            items=items[start : start + chunk],
            source_id=side["source"].pk,
        )
        seconds += time.perf_counter() - began
    if history:  # each item's bound, kept once as the job ends: part of the history's cost
        began = time.perf_counter()
        job_history_prune(job_id=job.pk)
        seconds += time.perf_counter() - began
    return seconds


def side_delete(scraper_name: str) -> None:
    """A side's jobs, source, items (their sightings and history go with them) and scraper, from an earlier run."""
    from crawls.models import CrawlJob
    from items.models import Item
    from registry.models import Scraper
    from sources.models import Source

    for model in (Item, CrawlJob, Source):
        model.objects.filter(scraper__name=scraper_name).delete()
    Scraper.objects.filter(name=scraper_name).delete()


def sides_make() -> dict[str, dict]:
    from django.conf import settings

    from access.tenancy import system_tenant
    from registry.models import Scraper
    from sources.models import Source

    sides = {}
    for name in SIDES:
        side_delete(f"bench-{name}")
        scraper = Scraper.objects.create(name=f"bench-{name}")
        source = Source.objects.create(url=f"https://shop.test/{name}", scraper=scraper)
        sides[name] = {"scraper": scraper, "source": source, "tenant": system_tenant().pk}
        sides[name]["changes_max"] = settings.TRAWL_ITEM_CHANGES_MAX
    return sides


def bench(args: argparse.Namespace, tmp: Path, stack: contextlib.ExitStack) -> dict:
    use_bench_environment(tmp, args.redis_url)
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    setup_django()
    from django.db import connection

    sides = sides_make()
    step = max(1, round(100 / args.changed_pct))
    print(f"changes bench on {connection.vendor}: {args.items} items, {args.changed_pct} % changed per re-crawl")
    for name, side in sides.items():
        store(side, catalog(args.items, step=step, round_number=0), history=name == SIDES[0])
    times: dict[str, list[float]] = {name: [] for name in SIDES}
    for number in range(1, args.rounds + 1):
        changed = range(number % step, args.items, step)
        items = catalog(args.items, step=step, round_number=number)
        order = SIDES if number % 2 else SIDES[::-1]
        for name in order:
            times[name].append(store(sides[name], items, history=name == SIDES[0]))
        ratio = times[SIDES[0]][-1] / times[SIDES[1]][-1]
        print(
            f"  round {number}: {len(changed)} changed; with history {times[SIDES[0]][-1]:.2f} s, "
            f"without {times[SIDES[1]][-1]:.2f} s: {ratio:.2f}"
        )
    ratio = statistics.median(times[SIDES[0]]) / statistics.median(times[SIDES[1]])
    print(f"with ÷ without field history: {ratio:.2f} (goal ≤ {GOAL}: {'meets' if ratio <= GOAL else 'MISSES'} it)")
    for name in SIDES:
        side_delete(f"bench-{name}")
    return {
        "bench": "changes",
        "database": connection.vendor,
        "items": args.items,
        "changed_pct": args.changed_pct,
        "with_history_s": round(statistics.median(times[SIDES[0]]), 3),
        "without_history_s": round(statistics.median(times[SIDES[1]]), 3),
        "ratio": round(ratio, 2),
        "goal": GOAL,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--changed-pct", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database-url", default="", help="a PostgreSQL database (default: throwaway SQLite)")
    parser.add_argument("--redis-url", default=BENCH_REDIS_URL)
    args = parser.parse_args()
    return bench_run(bench, args)


if __name__ == "__main__":
    sys.exit(main())
