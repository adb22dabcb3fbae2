"""Chromium's sandbox and environment as the worker launches it (runtime/rendering/environment.py), in the real
Chromium: sandboxed when the worker is not root — its renderers under a seccomp-bpf filter, in a user namespace of
their own — and `--no-sandbox` only as root, where Chromium refuses to start sandboxed.

The test machine runs as root, so the not-root launch runs as `nobody` (the uid a production worker is not, but an
unprivileged one all the same), through chromium_launch.py as Playwright runs it. An e2e worker here runs as root:
tests/security/test_render_helpers.py sees `--no-sandbox` there, as designed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from runtime.rendering.browser import LAUNCHER
from runtime.rendering.environment import NO_SANDBOX, chromium_args, chromium_env

CHROMIUM = "/usr/bin/chromium"
NOBODY = 65534

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium on this machine (make browser)")


def test_no_sandbox_only_as_root():
    assert NO_SANDBOX in chromium_args(euid=0)
    assert NO_SANDBOX not in chromium_args(euid=1000)
    assert "--webrtc-ip-handling-policy=disable_non_proxied_udp" in chromium_args(euid=1000)


def renderers(browser: psutil.Process) -> list[psutil.Process]:
    found = []
    for child in browser.children(recursive=True):
        try:
            if "--type=renderer" in child.cmdline():
                found.append(child)
        except psutil.Error:
            continue
    return found


def page_titled(home: Path, title: str) -> bool:
    """Does the browser (its DevTools endpoint, announced in its profile folder) show a page titled so?"""
    try:
        port = int((home / "DevToolsActivePort").read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
            return any(target.get("title") == title for target in json.load(answer))
    except (OSError, ValueError, IndexError):
        return False


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    return ""


def test_a_worker_that_is_not_root_runs_chromium_sandboxed():
    user = NOBODY if os.geteuid() == 0 else os.geteuid()
    home = Path(tempfile.mkdtemp(prefix="trawl-sandbox-"))
    if os.geteuid() == 0:
        os.chown(home, user, user)
    args = [*chromium_args(euid=user), "--headless", f"--user-data-dir={home}", "--remote-debugging-port=0"]
    env = chromium_env(CHROMIUM, {"PATH": "/usr/bin:/bin", "HOME": str(home)})
    launch = subprocess.Popen(
        [str(LAUNCHER), *args, "data:text/html,<title>sandboxed</title><p>sandboxed</p>"],
        user=user,
        group=user,
        extra_groups=[],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        browser = psutil.Process(launch.pid)  # the launcher execs Chromium: same process
        deadline = time.monotonic() + 120  # Chromium's start-up on a loaded machine, not what is measured
        # The page's title is known once its renderer runs web content: its sandbox is in place by then.
        while not page_titled(home, "sandboxed") and launch.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        found = renderers(browser)
        assert found, f"Chromium rendered no page (exit {launch.poll()})"
        for renderer in found:
            assert status_field(renderer.pid, "Seccomp") == "2", "the renderer runs without its seccomp-bpf filter"
            assert os.readlink(f"/proc/{renderer.pid}/ns/user") != os.readlink(f"/proc/{launch.pid}/ns/user")
        print(f"\n{len(found)} renderer(s) of a Chromium run as uid {user}: seccomp filter, own user namespace")
    finally:
        os.killpg(launch.pid, 9)
        launch.wait(10)
        shutil.rmtree(home, ignore_errors=True)
