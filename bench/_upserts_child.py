"""The two children of bench/item_upserts.py, each run with DATABASE_URL naming the bench's PostgreSQL database.

`setup`: migrate, one tenant and one scraper, then `--preload` items written with COPY in a shuffled order (so the
items of one crawl lie scattered over the heap, as they do when many crawls write at once), one sighting each,
VACUUM ANALYZE. `write`: one writer, a crawl process's ingestion: its own job, items `--first` … `--first+--count-1`
sent chunk by chunk (TRAWL_ITEM_CHUNK, ingestion's size) through the real `items_upsert` (`--method trawl`) or the
least PostgreSQL does for the same rows (`--method baseline`), each chunk its own transaction. A writer prints
"ready" once its items are built and its connection open, waits for a line on stdin, then prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime

import django
import psutil
from _common import BASE_DIR  # noqa: F401 - puts Trawl's modules on sys.path

SCRAPER = "bench-shop"
DESCRIPTION = "A plain cotton shirt with long sleeves, two buttoned pockets and a classic collar; machine washable. "


def item(n: int, version: int = 0) -> dict:
    """Item n of the shop as a crawl scrapes it; `version` moves its price (what makes a re-crawled item changed).
    `_crawled_at` differs on every crawl but is bookkeeping: it never makes an item look changed."""
    return {
        "url": f"https://shop{n % 997}.test/products/{n}",
        "sku": f"SKU-{n:09d}",
        "title": f"Shirt {n}, blue, size {n % 40}",
        "price": f"{(n % 9000) / 100 + 1 + version:.2f}",
        "currency": "EUR",
        "category": f"Shirts {n % 50}",
        "in_stock": n % 3 != 0,
        "description": DESCRIPTION * 2,
        "_crawled_at": datetime.now(UTC).isoformat(),
    }


def item_row(data: dict, *, tenant_id: int, scraper_id: int, job_id, now: datetime) -> tuple:
    """The row items_upsert writes for a new item, in ITEM_COLUMNS' order (no category mapped yet)."""
    from items.services import category_name_of, content_hash, item_fingerprint

    digest = content_hash(data)
    fingerprint = item_fingerprint(data)
    url = str(data.get("url") or "")[:2000]
    return (
        tenant_id,
        scraper_id,
        fingerprint,
        url,
        json.dumps(data),
        digest,
        now,
        now,
        now,
        job_id,
        None,
        category_name_of(data),
    )


def column_names() -> str:
    from items.models import Item
    from items.services import ITEM_COLUMNS

    return ", ".join(Item._meta.get_field(name).column for name in ITEM_COLUMNS)


def owners():
    from access.tenancy import system_tenant
    from registry.models import Scraper

    scraper, _ = Scraper.objects.get_or_create(name=SCRAPER)
    return system_tenant().pk, scraper


def setup(preload: int) -> dict:
    from django.core.management import call_command
    from django.db import connection

    from crawls.models import CrawlJob

    call_command("migrate", verbosity=0)
    tenant_id, scraper = owners()
    job = CrawlJob.objects.create(url="https://shop0.test/", scraper=scraper)
    order = list(range(preload))
    random.Random(32).shuffle(order)
    now, started = datetime.now(UTC), time.perf_counter()
    raw = connection.connection
    with raw.cursor() as cursor, cursor.copy(f"COPY crawls_item ({column_names()}) FROM STDIN") as copy:
        for n in order:
            copy.write_row(item_row(item(n), tenant_id=tenant_id, scraper_id=scraper.pk, job_id=job.pk, now=now))
    with raw.cursor() as cursor:
        cursor.execute(
            "INSERT INTO crawls_itemsighting (job_id, item_id, change) SELECT %s, id, 'new' FROM crawls_item", [job.pk]
        )
    raw.commit()
    raw.autocommit = True
    with raw.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('crawls_item'))")
        size = cursor.fetchone()[0]
    from django.conf import settings

    took = round(time.perf_counter() - started, 1)
    return {
        "preloaded": preload,
        "preload_seconds": took,
        "items_table": size,
        "chunk_items": settings.TRAWL_ITEM_CHUNK,
    }


class Writer:
    def __init__(self, *, kind: str, first: int, count: int) -> None:
        from django.conf import settings
        from django.db import connection

        from crawls.models import CrawlJob

        self.kind, self.chunk = kind, settings.TRAWL_ITEM_CHUNK
        self.tenant_id, scraper = owners()
        self.scraper_id = scraper.pk
        self.job = CrawlJob.objects.create(url="https://shop0.test/", scraper=scraper)
        version = 1 if kind == "changed" else 0  # new items and unchanged ones: as preloaded (or never seen)
        self.items = [item(n, version) for n in range(first, first + count)]
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.backend = psutil.Process(cursor.fetchone()[0])  # the PostgreSQL process serving this writer

    def trawl(self, chunk: list[dict]) -> None:
        from items.services import items_upsert

        items_upsert(job_id=self.job.pk, scraper_id=self.job.scraper_id, tenant_id=self.tenant_id, items=chunk)

    def baseline(self, chunk: list[dict]) -> None:
        """The least PostgreSQL does for the same rows: new ones COPied into the items table (its indexes, no
        ON CONFLICT, no sightings), changed ones COPied to a temporary table and applied by one UPDATE … FROM,
        unchanged ones one UPDATE of last_seen and last_job. The keys and hashes are computed as Trawl does."""
        from django.db import connection, transaction

        now = datetime.now(UTC)
        owner = {"tenant_id": self.tenant_id, "scraper_id": self.scraper_id, "job_id": self.job.pk, "now": now}
        with transaction.atomic(), connection.connection.cursor() as cursor:
            if self.kind == "unchanged":
                from items.services import item_fingerprint

                cursor.execute(
                    "UPDATE crawls_item SET last_seen = %s, last_job_id = %s "
                    "WHERE tenant_id = %s AND scraper_id = %s AND fingerprint = ANY(%s)",
                    [now, self.job.pk, self.tenant_id, self.scraper_id, [item_fingerprint(data) for data in chunk]],
                )
                return
            table = "crawls_item" if self.kind == "new" else "bench_staging"
            with cursor.copy(f"COPY {table} ({column_names()}) FROM STDIN") as copy:
                for data in chunk:
                    copy.write_row(item_row(data, **owner))
            if self.kind == "changed":
                cursor.execute(
                    "UPDATE crawls_item i SET data = s.data, content_hash = s.content_hash, url = s.url, "
                    "last_seen = s.last_seen, changed_at = s.changed_at, last_job_id = s.last_job_id "
                    "FROM bench_staging s WHERE i.tenant_id = s.tenant_id AND i.scraper_id = s.scraper_id "
                    "AND i.fingerprint = s.fingerprint"
                )

    def run(self, method: str, *, profile: bool, wal_compression: str) -> dict:
        from django.db import connection

        if wal_compression:
            with connection.cursor() as cursor:  # a superuser's per-session setting
                cursor.execute(f"SET wal_compression = {wal_compression}")
        if method == "baseline" and self.kind == "changed":
            with connection.cursor() as cursor:  # a temporary table is not WAL-logged: outside the measure
                cursor.execute(
                    f"CREATE TEMP TABLE bench_staging ON COMMIT DELETE ROWS AS SELECT {column_names()} "
                    "FROM crawls_item WITH NO DATA"
                )
        write = getattr(self, method)
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
        print("ready", flush=True)
        sys.stdin.readline()
        backend_before, cpu_before = sum(self.backend.cpu_times()[:2]), time.process_time()
        started = time.monotonic()
        if profiler:
            profiler.enable()
        for start in range(0, len(self.items), self.chunk):
            write(self.items[start : start + self.chunk])
        if profiler:
            profiler.disable()
        ended = time.monotonic()
        result = {
            "started": started,
            "ended": ended,
            "items": len(self.items),
            "cpu": time.process_time() - cpu_before,
            "backend_cpu": sum(self.backend.cpu_times()[:2]) - backend_before,
        }
        if profiler:
            import io
            import pstats

            text = io.StringIO()
            # Trawl's own functions and the waits on PostgreSQL's answers, by cumulative time
            stats = pstats.Stats(profiler, stream=text).sort_stats("cumulative")
            stats.print_stats(r"(items|catalog)/|psycopg/connection\.py:\d+\(wait\)|_json_dumps|hashlib", 16)
            result["profile"] = text.getvalue()
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=("setup", "write"))
    parser.add_argument("--preload", type=int, default=0)
    parser.add_argument("--kind", choices=("new", "changed", "unchanged"))
    parser.add_argument("--method", choices=("trawl", "baseline"))
    parser.add_argument("--first", type=int)
    parser.add_argument("--count", type=int)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--wal-compression", default="")
    args = parser.parse_args()
    django.setup()
    if args.action == "setup":
        print(json.dumps(setup(args.preload)))
    else:
        writer = Writer(kind=args.kind, first=args.first, count=args.count)
        print(
            json.dumps(writer.run(args.method, profile=args.profile, wal_compression=args.wal_compression)), flush=True
        )


if __name__ == "__main__":
    main()
