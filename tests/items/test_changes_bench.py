"""bench/changes.py still runs against the real items_upsert: a tiny catalog, one round, a throwaway SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_times_a_recrawl_with_and_without_field_history():
    command = [sys.executable, "bench/changes.py", "--items", "400", "--rounds", "1"]
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    out = subprocess.run(
        [*command, "--redis-url", redis_url], cwd=ROOT, env=dict(os.environ), capture_output=True, text=True
    )

    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["bench"] == "changes" and result["items"] == 400 and result["database"] == "sqlite"
    assert result["with_history_s"] > 0 and result["without_history_s"] > 0 and result["ratio"] > 0
    assert "13 changed" in out.stdout  # 3 %: one item in 33
