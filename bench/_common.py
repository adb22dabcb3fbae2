"""Helpers shared by the benchmarks: a generated local site, child processes that always stop, peak RSS sampling."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil

BENCH_DIR = Path(__file__).resolve().parent
BASE_DIR = BENCH_DIR.parent
PYTHON = sys.executable
# The Redis of the benchmarks that start a worker (a Celery broker and Trawl's state): database 4, below the ones
# `make test`'s pytest-xdist workers take (15, 14, 13, ...), so a benchmark's worker never takes a test's tasks when
# both run on one machine.
BENCH_REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/4")
if str(BASE_DIR) not in sys.path:
    sys.path.insert(1, str(BASE_DIR))  # benchmarks run as scripts yet import Trawl's modules


def write_link_site(root: Path, *, pages: int = 2000) -> str:
    """Write `pages` small interlinked pages (plus an allow-all robots.txt); return the start page's path.

    Page i links to its binary-tree children 2i+1 and 2i+2 (so every page is at most log2(pages) clicks deep),
    its parent, its successor and a pseudo-random page: deterministic, and most links point at pages already seen.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    for i in range(pages):
        targets = dict.fromkeys(n for n in (2 * i + 1, 2 * i + 2, (i - 1) // 2, (i + 1) % pages, (i * 37 + 11) % pages))
        links = "".join(f'<li><a href="/page-{n}.html">Page {n}</a></li>' for n in targets if 0 <= n < pages)
        (root / f"page-{i}.html").write_text(
            f"<!doctype html><html><head><title>Page {i}</title></head><body><h1>Page {i}</h1>"
            f"<p>Benchmark page number {i} of {pages}.</p><ul>{links}</ul></body></html>"
        )
    return "/page-0.html"


def spawn(command: list[str], *, log_path: Path | None = None, **kwargs) -> subprocess.Popen:
    """Start a child in a session of its own, so `stop` also reaches its children and Ctrl-C reaches only us."""
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - the child owns it from here
    try:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
    finally:
        if log_path:
            log.close()


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the child (its whole process group if it leads one), SIGKILL what is left after `timeout`."""

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, sig)
            else:
                process.send_signal(sig)

    if process.poll() is None:
        send(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    # Grandchildren (pool processes) can outlive a parent that died first; they are still in its group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(5)


@contextlib.contextmanager
def running(process: subprocess.Popen, timeout: float = 20) -> Iterator[subprocess.Popen]:
    try:
        yield process
    finally:
        stop(process, timeout)


@contextlib.contextmanager
def served(root: Path, hits: Path | None = None, delay: float = 0, hosts: Iterable[str] = ()) -> Iterator[str]:
    """Serve `root` from a separate process (bench/_serve.py); yield its base URL. `hits`: log every request path;
    `delay`: seconds every answer waits (a site with latency); `hosts`: loopback addresses to serve on, one port (the
    URL names the first; hits are then logged with their time and address)."""
    hosts = list(hosts)
    command = [PYTHON, str(BENCH_DIR / "_serve.py"), str(root), *(["--hits", str(hits)] if hits else [])]
    command += ["--delay", str(delay), *(["--hosts", ",".join(hosts)] if hosts else [])]
    with running(subprocess.Popen(command, stdout=subprocess.PIPE, start_new_session=True)) as process:
        port = int(process.stdout.readline() or 0)
        if not port:
            raise RuntimeError(f"the site server exited with {process.wait()}")
        yield f"http://{hosts[0] if hosts else '127.0.0.1'}:{port}"


class PeakRss:
    """Sample the RSS of the processes `pids()` names every `interval` seconds, in a thread; keep the peak (bytes).

    With `proportional`, their PSS instead: a page several processes share counts once among them, as the machine
    spends it (RSS counts it in each: forked pool processes share their parent's modules). Reading it costs a walk of
    each process's smaps, so sample it at most every second or so."""

    def __init__(
        self, pids: Callable[[], Iterable[int]], interval: float = 0.05, *, proportional: bool = False
    ) -> None:
        self.pids = pids
        self.interval = interval
        self.proportional = proportional
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.is_set():
            total = 0
            for pid in self.pids():
                with contextlib.suppress(psutil.Error):
                    process = psutil.Process(pid)
                    total += process.memory_full_info().pss if self.proportional else process.memory_info().rss
            self.peak = max(self.peak, total)
            self._done.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")  # psutil.cpu_times(): guest time is counted in user


class BusyCores:
    """How many of the machine's CPUs were busy, on average, while the block ran (every process, not only ours)."""

    def __enter__(self) -> BusyCores:
        self._times, self._started = psutil.cpu_times(), time.monotonic()
        self.cores = 0.0
        return self

    def __exit__(self, *exc) -> None:
        after, elapsed = psutil.cpu_times(), time.monotonic() - self._started
        busy = sum(getattr(after, name, 0) - getattr(self._times, name, 0) for name in BUSY_FIELDS)
        self.cores = busy / elapsed if elapsed else 0.0


def mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def exit_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so `finally` blocks stop our children on either signal."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def bench_run(bench: Callable[..., dict], args: Any) -> int:
    """A bench's `main`: `bench(args, tmp, stack)` in a temporary folder, every process it started stopped on the way
    out (Ctrl-C and SIGTERM included); its summary printed as one JSON line."""
    exit_on_sigterm()
    try:
        with tempfile.TemporaryDirectory(prefix="trawl-bench-") as tmp, contextlib.ExitStack() as stack:
            summary = bench(args, Path(tmp), stack)
    except KeyboardInterrupt:
        print("\ninterrupted; every process this bench started has been stopped", file=sys.stderr)
        return 130
    print(json.dumps(summary))
    return 0
