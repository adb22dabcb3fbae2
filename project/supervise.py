"""`make run`'s process runner: every Procfile process under one supervisor that restarts a process which exits,
with backoff, instead of stopping the whole stack (as honcho does when one process ends).

A dependency that blinks (Redis restarted, the database away) can still make a process exit — Celery's main process
has exited on Redis reconnection bugs — and a development stack where one crash silently stops web, beat, Flower and
the demo hides the cause. Here the process is started again, the reason logged, and the others go on. Ctrl-C or
SIGTERM stops everything, whatever our output goes to: under `make run | tee run.log` the terminal's Ctrl-C kills tee
too, so every write after it fails (EPIPE); the children are signalled before anything is written, and output that
cannot be written is dropped instead of ending the supervisor with its children still running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
HEALTHY_AFTER_SECONDS = 60.0  # a process up this long has recovered: its next crash starts the backoff again
STOP_GRACE_SECONDS = 20.0  # a crawl worker's warm shutdown hands its crawls back before it exits


def procfile_read(path: Path) -> dict[str, str]:
    """`name: command` lines, in order; blank lines and comments skipped."""
    entries: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        name, command = line.split(":", 1)
        entries[name.strip()] = command.strip()
    return entries


def restart_delay(consecutive_failures: int) -> float:
    """Exponential backoff: 1 s, 2 s, 4 s ... capped at 30 s."""
    return min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** max(0, consecutive_failures - 1))


@dataclass
class Supervised:
    name: str
    command: str
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0  # consecutive exits without a healthy period between them
    restart_at: float | None = None
    restarts: int = 0
    readers: list[threading.Thread] = field(default_factory=list)


class Supervisor:
    def __init__(self, entries: dict[str, str], *, cwd: Path, out=None) -> None:
        self.cwd = cwd
        self.out = out or sys.stdout
        self.width = max((len(name) for name in entries), default=4) + 2
        self.processes = [Supervised(name=name, command=command) for name, command in entries.items()]
        self.stopping = threading.Event()
        self._write_lock = threading.Lock()

    def say(self, name: str, message: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        with self._write_lock:
            try:
                self.out.write(f"{stamp} {name + '.1':<{self.width}} | {message}\n")
                self.out.flush()
            except (OSError, ValueError):  # the reader went away (BrokenPipeError) or the stream is closed
                self.out = _output_discarded(self.out)

    def start(self, entry: Supervised) -> None:
        # exec: the shell expands $VARS (as in any Procfile) and is then replaced by the process itself, so the
        # signals we send reach it; a session of its own so stopping it also stops its children (pool processes).
        entry.process = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {entry.command}"],
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        entry.started_at = time.monotonic()
        entry.restart_at = None
        reader = threading.Thread(target=self._relay, args=(entry, entry.process), daemon=True)
        reader.start()
        entry.readers.append(reader)
        self.say("system", f"{entry.name}.1 started (pid={entry.process.pid})")

    def _relay(self, entry: Supervised, process: subprocess.Popen) -> None:
        for raw in iter(process.stdout.readline, b""):
            self.say(entry.name, raw.decode(errors="replace").rstrip("\n"))
        process.stdout.close()

    def check(self, now: float) -> None:
        """Notice exits and start again whatever is due."""
        for entry in self.processes:
            if entry.process is not None and entry.restart_at is None:
                code = entry.process.poll()
                if code is None:
                    continue
                _signal_group(entry.process, signal.SIGKILL)  # what the leader left behind (pool processes) goes too
                healthy = now - entry.started_at >= HEALTHY_AFTER_SECONDS
                entry.failures = 1 if healthy else entry.failures + 1
                delay = restart_delay(entry.failures)
                entry.restart_at = now + delay
                self.say(
                    "system",
                    f"{entry.name}.1 exited (rc={code}) after {now - entry.started_at:.0f}s; restarting in {delay:.0f}s"
                    f" (exit {entry.failures} in a row; the others keep running)",
                )
            elif entry.restart_at is not None and now >= entry.restart_at:
                entry.restarts += 1
                self.start(entry)

    def run(self, *, on_started: Callable[[Supervisor], None] | None = None, poll: float = 0.5) -> int:
        for entry in self.processes:
            self.start(entry)
        if on_started:
            threading.Thread(target=on_started, args=(self,), daemon=True).start()
        while not self.stopping.wait(poll):
            self.check(time.monotonic())
        return self.stop_all()

    def request_stop(self, *_args) -> None:
        self.stopping.set()

    def stop_all(self) -> int:
        running = [entry for entry in self.processes if entry.process and entry.process.poll() is None]
        for entry in running:  # every child first: saying so is a write that may fail or block
            _signal_group(entry.process, signal.SIGTERM)
        for entry in running:
            self.say("system", f"sent SIGTERM to {entry.name}.1 (pid {entry.process.pid})")
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for entry in running:
            try:
                entry.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say("system", f"{entry.name}.1 did not stop within {STOP_GRACE_SECONDS:.0f}s: SIGKILL")
                _signal_group(entry.process, signal.SIGKILL)
                entry.process.wait(10)
        for entry in self.processes:
            for reader in entry.readers:
                reader.join(2)
        return 0


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


def _output_discarded(out):
    """Where output goes once its reader is gone: the same descriptor pointed at /dev/null when there is one, so
    whatever is still buffered (and the interpreter's flush at exit) goes nowhere quietly, else /dev/null itself."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, out.fileno())
        return out
    except (OSError, ValueError, AttributeError):  # not a file (a StringIO), or already closed
        return open(os.devnull, "w")  # lives as long as the supervisor
    finally:
        os.close(devnull)


def supervise(procfile: Path, *, cwd: Path, on_started: Callable[[Supervisor], None] | None = None) -> int:
    """Run the Procfile until SIGINT/SIGTERM; what devrun calls."""
    supervisor = Supervisor(procfile_read(procfile), cwd=cwd)
    # A write to a pipe nobody reads fails with EPIPE (handled in `say`) instead of killing us before the children
    # are stopped; the children get SIGPIPE's default back (Popen's restore_signals).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, supervisor.request_stop)
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    return supervisor.run(on_started=on_started)


if __name__ == "__main__":  # python -m project.supervise [Procfile]
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "Procfile")
    sys.exit(supervise(path, cwd=path.resolve().parent))
