"""bench/item_upserts.py still runs against the real items_upsert: tiny sizes, one writer, its own database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.postgres import SERVER, postgres_answers

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not postgres_answers(), reason=f"no PostgreSQL at {SERVER}")
def test_the_bench_measures_every_kind_of_item_against_its_baseline_and_drops_its_database():
    name = f"trawl_bench_upserts_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "BENCH_UPSERTS_PG_URL": f"{SERVER}/{name}"}
    command = [sys.executable, "bench/item_upserts.py", "--preload", "1200", "--items", "200", "--writers", "1"]
    out = subprocess.run(
        [*command, "--wal-compression", ""], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )

    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    phases = {(row["kind"], row["method"]): row for row in result["results"]}
    kinds = ("new", "changed", "unchanged")
    assert set(phases) == {(kind, method) for kind in kinds for method in ("baseline", "trawl")}
    assert all(row["items"] == 200 and row["items_per_s"] > 0 and row["wal_bytes"] > 0 for row in phases.values())
    assert result["preloaded"] == 1200 and result["chunk_items"] > 0
    assert {ratio["kind"] for ratio in result["ratios"]} == set(kinds)
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres") as connection:
        assert not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
