"""`make bench`: run every benchmark script in bench/ in turn and show its output.

Benchmarks are the bench/*.py files; this runner and helpers (names starting with "_") are skipped. A benchmark
that crashes does not stop the others; the exit status says whether any crashed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def benchmarks() -> list[Path]:
    return [
        path for path in sorted(BENCH_DIR.glob("*.py")) if path.name != "run_all.py" and not path.name.startswith("_")
    ]


def main() -> int:
    failed = []
    for path in benchmarks():
        print(f"=== {path.name} ===", flush=True)
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, str(path)], cwd=BENCH_DIR.parent)
        try:
            code = process.wait()
        except KeyboardInterrupt:
            # The benchmark got the same Ctrl-C: let it stop what it started before we leave.
            process.wait()
            print("\nbench interrupted", file=sys.stderr)
            return 130
        print(f"=== {path.name}: exit {code} after {time.monotonic() - started:.0f} s ===\n", flush=True)
        if code:
            failed.append(path.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
