"""Item upserts on one PostgreSQL primary: items/s through the real `items_upsert`, new, changed and unchanged items,
from 1, 2 and 4 writer processes at once, into an items table already holding `--preload` items; the least PostgreSQL
does for the same rows in the same run as the baseline; and where the time goes.

    .venv/bin/python bench/item_upserts.py [--preload 1000000] [--items 12000] [--writers 1,2,4] [--profile]

A writer is what a crawl process's ingestion does: its own job, `--items` ÷ N items sent in chunks of
TRAWL_ITEM_CHUNK (200), one transaction each (bench/_upserts_child.py). New items are keys never seen; changed items
are preloaded keys whose price moved (so a price change is recorded too); unchanged items are preloaded keys with the
same content, what an incremental re-crawl sends. Every phase has keys of its own and starts after a CHECKPOINT, so
each page it touches first writes a full-page image to the WAL, as a table far bigger than what a checkpoint interval
touches does in steady state. The baseline, per kind: new rows COPied into the items table; changed rows COPied to a
temporary table and applied by one UPDATE … FROM; unchanged rows one UPDATE of last_seen and last_job (keys and
hashes computed as Trawl does; no sightings, no price history, no read before the write).

Measured per phase: items/s over the span from the first writer's start to the last one's end; the writers' CPU
(time.process_time) and their wall − CPU (waiting on PostgreSQL or for a core); the CPU of the PostgreSQL backends
serving them (psutil) and of the WAL writer, checkpointer, background writer and autovacuum; WAL bytes
(pg_current_wal_lsn, the whole server: `other_commits` counts other databases' commits meanwhile) and,
where pg_waldump can read the server's WAL directory, how much of it is full-page images. Then each kind's busiest
Trawl phase again with `wal_compression` (`--wal-compression`, default lz4; '' skips). `--profile`: one more 1-writer
Trawl phase per kind under cProfile (its top entries go to stderr; slowed by the profiler, it is not in the table).

PostgreSQL: the database named by BENCH_UPSERTS_PG_URL (default postgres://postgres@127.0.0.1:5432/trawl_bench_upserts;
created and dropped; a superuser, for CHECKPOINT).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _common import BASE_DIR, BENCH_DIR, PYTHON
from _pg_server import Server, aux_cpu
from dispatch import _pg, _pg_answers

PG_URL = os.environ.get("BENCH_UPSERTS_PG_URL", "postgres://postgres@127.0.0.1:5432/trawl_bench_upserts")
CHILD = str(BENCH_DIR / "_upserts_child.py")
KINDS = ("new", "changed", "unchanged")


def child_env() -> dict:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "PYTHONPATH": str(BASE_DIR),
        "DATABASE_URL": PG_URL,
    }


def phase(
    server: Server,
    *,
    kind: str,
    method: str,
    writers: int,
    first: int,
    count: int,
    profile: bool = False,
    wal_compression: str = "",
) -> dict:
    server.connection.execute("CHECKPOINT")
    per = count // writers
    options = [
        *(["--profile"] if profile else []),
        *(["--wal-compression", wal_compression] if wal_compression else []),
    ]
    commands = [
        [
            PYTHON,
            CHILD,
            "write",
            "--kind",
            kind,
            "--method",
            method,
            "--first",
            str(first + w * per),
            "--count",
            str(per),
            *options,
        ]
        for w in range(writers)
    ]
    processes = [
        subprocess.Popen(
            command,
            env=child_env(),
            cwd=BASE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    try:
        for process in processes:
            if process.stdout.readline().strip() != "ready":
                raise SystemExit(f"a writer failed:\n{process.communicate()[1][-3000:]}")
        lsn, others, aux = server.lsn(), server.commits(), aux_cpu()
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        outs = [process.communicate() for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    if any(process.returncode for process in processes):
        raise SystemExit("a writer failed:\n" + "\n".join(err[-3000:] for _, err in outs))
    end_lsn, aux_after = server.lsn(), aux_cpu()
    runs = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    items = sum(run["items"] for run in runs)
    span = max(run["ended"] for run in runs) - min(run["started"] for run in runs)
    fpi = server.fpi_bytes(lsn, end_lsn)

    def per_item_us(seconds: float) -> float:
        return round(seconds / items * 1e6, 1)

    commits = server.commits()
    row = {
        "kind": kind,
        "method": method + (f", wal_compression={wal_compression}" if wal_compression else ""),
        "writers": writers,
        "items": items,
        "seconds": round(span, 3),
        "items_per_s": round(items / span),
        "writer_cpu_us": per_item_us(sum(run["cpu"] for run in runs)),
        "writer_wait_us": per_item_us(sum(run["ended"] - run["started"] - run["cpu"] for run in runs)),
        "backend_cpu_us": per_item_us(sum(run["backend_cpu"] for run in runs)),
        "aux_cpu_us": per_item_us(sum(aux_after.get(pid, start) - start for pid, start in aux.items())),
        "wal_bytes": round(server.wal_bytes(lsn, end_lsn) / items),
        "wal_fpi_bytes": None if fpi is None else round(fpi / items),
        "other_commits": sum(count - others.get(oid, count) for oid, count in commits.items()),
        "load_average": round(os.getloadavg()[0], 2),
    }
    for run in runs:
        if "profile" in run:
            print(f"--- cProfile, {kind}, 1 writer (not in the table) ---\n{run['profile']}", file=sys.stderr)
    return row


def run(args: argparse.Namespace) -> dict:
    counts = [int(n) for n in args.writers.split(",")]
    plan = [(kind, writers, method, "") for kind in KINDS for writers in counts for method in ("baseline", "trawl")]
    # The mitigation for WAL volume, a superuser's per-session setting: the busiest Trawl phase of each kind again.
    plan += [(kind, max(counts), "trawl", args.wal_compression) for kind in KINDS if args.wal_compression]
    plan += [(kind, 1, "trawl", "profile") for kind in KINDS if args.profile]  # cProfile slows it: not in the table
    if args.preload < sum(kind != "new" for kind, *_ in plan) * args.items:
        raise SystemExit("--preload must hold fresh keys for every changed and unchanged phase")
    _pg(PG_URL, "create")
    try:
        setup = subprocess.run(
            [PYTHON, CHILD, "setup", "--preload", str(args.preload)],
            env=child_env(),
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
            check=False,
        )
        if setup.returncode:
            raise SystemExit(f"setup failed:\n{setup.stderr[-3000:]}")
        info = json.loads(setup.stdout.strip().splitlines()[-1])
        server, rows = Server(PG_URL), []
        fresh, known = args.preload, 0  # the next never-seen key, the next preloaded key no phase has used
        try:
            for kind, writers, method, variant in plan:
                first = fresh if kind == "new" else known
                profile = variant == "profile"
                row = phase(
                    server,
                    kind=kind,
                    method=method,
                    writers=writers,
                    first=first,
                    count=args.items,
                    profile=profile,
                    wal_compression="" if profile else variant,
                )
                if not profile:
                    rows.append(row)
                    print(summary(row), file=sys.stderr, flush=True)
                if kind == "new":
                    fresh += args.items
                else:
                    known += args.items
        finally:
            server.connection.close()
    finally:
        _pg(PG_URL, "drop")
    return {"benchmark": "item_upserts", **info, "results": rows, "ratios": ratios(rows)}


def ratios(rows: list[dict]) -> list[dict]:
    """Trawl ÷ the baseline, per kind and writer count: in time (the baseline's items/s ÷ Trawl's), in PostgreSQL
    backend CPU per item and in WAL per item. The time swings with the machine's load; the other two hardly do."""
    base = {(row["kind"], row["writers"]): row for row in rows if row["method"] == "baseline"}
    return [
        {
            "kind": row["kind"],
            "writers": row["writers"],
            "ratio_to_baseline": round(other["items_per_s"] / row["items_per_s"], 2),
            "backend_cpu_ratio": round(row["backend_cpu_us"] / max(other["backend_cpu_us"], 0.1), 2),
            "wal_ratio": round(row["wal_bytes"] / max(other["wal_bytes"], 1), 2),
        }
        for row in rows
        if row["method"] == "trawl" and (other := base.get((row["kind"], row["writers"])))
    ]


def summary(row: dict) -> str:
    fpi = "" if row["wal_fpi_bytes"] is None else f" ({row['wal_fpi_bytes']:,} in full-page images)"
    return (
        f"{row['kind']:>9} × {row['writers']} {row['method']:>8}: {row['items_per_s']:>6,} items/s "
        f"({row['items']:,} in {row['seconds']} s); per item: writer CPU {row['writer_cpu_us']} µs, writer waiting "
        f"{row['writer_wait_us']} µs, PostgreSQL backends {row['backend_cpu_us']} µs + own processes "
        f"{row['aux_cpu_us']} µs, WAL {row['wal_bytes']:,} B{fpi}; other databases' commits {row['other_commits']}, "
        f"load {row['load_average']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preload", type=int, default=1_000_000, help="items in the table before any phase")
    parser.add_argument("--items", type=int, default=12_000, help="items per phase, split between its writers")
    parser.add_argument("--writers", default="1,2,4", help="concurrent writer processes, one phase each")
    parser.add_argument(
        "--wal-compression",
        default="lz4",
        help="each kind's busiest Trawl phase again with this "
        "wal_compression (lz4, pglz, zstd: what the server was built with); '' for none",
    )
    parser.add_argument("--profile", action="store_true", help="one more 1-writer Trawl phase per kind, in cProfile")
    args = parser.parse_args()
    if not _pg_answers(PG_URL):  # as bench/dispatch.py does: `make bench` goes on without PostgreSQL
        reason = f"nothing answers at {PG_URL.rpartition('/')[0]}"
        print(f"skipped: {reason}", file=sys.stderr)
        print(json.dumps({"benchmark": "item_upserts", "skipped": reason, "results": []}))
        return
    result = run(args)
    for ratio in result["ratios"]:
        print(
            f"{ratio['kind']:>9} × {ratio['writers']}: Trawl ÷ baseline: time {ratio['ratio_to_baseline']}, "
            f"PostgreSQL backend CPU {ratio['backend_cpu_ratio']}, WAL {ratio['wal_ratio']}",
            file=sys.stderr,
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
