"""`make run`'s process runner restarts a process that exits, with backoff, and leaves the others running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from project.supervise import BACKOFF_MAX_SECONDS, procfile_read, restart_delay

BASE_DIR = Path(__file__).resolve().parent.parent


def wait_until(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_backoff_doubles_and_is_capped():
    assert [restart_delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert restart_delay(50) == BACKOFF_MAX_SECONDS


def test_procfile_lines_are_read_in_order(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text("# comment\nweb: gunicorn x --bind 127.0.0.1:8000\n\nworker: celery -A project worker\n")
    assert procfile_read(procfile) == {"web": "gunicorn x --bind 127.0.0.1:8000", "worker": "celery -A project worker"}


def test_a_crashing_process_is_restarted_and_the_others_keep_running(tmp_path):
    python = sys.executable
    steady_pid = tmp_path / "steady.pid"
    starts = tmp_path / "starts"
    crasher = f"import sys; open({str(starts)!r}, 'a').write('x'); print('crashing now', flush=True); sys.exit(3)"
    steady = f"import os, time; open({str(steady_pid)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    (tmp_path / "Procfile").write_text(f'steady: {python} -c "{steady}"\ncrasher: {python} -c "{crasher}"\n')
    supervisor = subprocess.Popen(
        [python, "-m", "project.supervise", str(tmp_path / "Procfile")],
        cwd=BASE_DIR,
        env={**os.environ, "PYTHONPATH": str(BASE_DIR)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(steady_pid.exists, timeout=30, what="the steady process started")
        pid = int(steady_pid.read_text())
        # 1 s, then 2 s of backoff: three starts of the crasher.
        wait_until(lambda: starts.exists() and len(starts.read_text()) >= 3, timeout=60, what="three starts")
        assert alive(pid), "the steady process was stopped when the other one exited"
        assert int(steady_pid.read_text()) == pid, "the steady process was restarted"
        assert supervisor.poll() is None, "the supervisor stopped"
    finally:
        supervisor.send_signal(signal.SIGTERM)
        output, _ = supervisor.communicate(timeout=60)
    assert not alive(pid), "SIGTERM to the supervisor left a process running"
    assert "crasher.1 exited (rc=3)" in output and "restarting in 1s" in output and "restarting in 2s" in output
    assert "crashing now" in output  # each process's own output is relayed, prefixed with its name
