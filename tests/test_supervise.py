"""`make run`'s process runner restarts a process that exits, with backoff, and leaves the others running."""

from __future__ import annotations

import contextlib
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


def test_ctrl_c_under_tee_stops_every_process(tmp_path):
    """`make run 2>&1 | tee run.log`, then Ctrl-C: the terminal sends SIGINT to the whole process group, tee dies,
    and every write the supervisor makes after that fails. Every child must still be stopped."""
    python = sys.executable
    pid_files = [tmp_path / "quiet.pid", tmp_path / "chatty.pid"]
    quiet = f"import os, time; open({str(pid_files[0])!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    chatty = (
        f"import os, time; open({str(pid_files[1])!r}, 'w').write(str(os.getpid()))\n"
        "while True: print('x' * 200, flush=True); time.sleep(0.01)"
    )
    (tmp_path / "chatty.py").write_text(chatty)
    (tmp_path / "Procfile").write_text(f'quiet: {python} -c "{quiet}"\nchatty: {python} {tmp_path / "chatty.py"}\n')
    supervisor_pid = tmp_path / "supervisor.pid"
    supervise = f"{python} -m project.supervise {tmp_path / 'Procfile'}"
    # A shell pipeline in a session of its own: the shell, the supervisor and tee share one process group, as they
    # would under a terminal.
    pipeline = subprocess.Popen(
        [
            "/bin/sh",
            "-c",
            f"/bin/sh -c 'echo $$ > {supervisor_pid}; exec {supervise}' 2>&1 | tee {tmp_path / 'run.log'}",
        ],
        cwd=BASE_DIR,
        env={**os.environ, "PYTHONPATH": str(BASE_DIR)},
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    pids = []
    try:
        for path in pid_files:
            wait_until(lambda path=path: path.exists() and path.read_text(), timeout=30, what=f"{path.name} written")
            pids.append(int(path.read_text()))
        pids.append(int(supervisor_pid.read_text()))
        os.killpg(pipeline.pid, signal.SIGINT)  # the terminal's Ctrl-C
        pipeline.wait(timeout=10)
        wait_until(
            lambda: not any(running(pid) for pid in pids), timeout=60, what="the supervisor and its children gone"
        )
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pipeline.pid, signal.SIGKILL)


def running(pid: int) -> bool:
    """Alive and not a zombie (a process whose parent died is reaped by whoever adopts it, perhaps later)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
