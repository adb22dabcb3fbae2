"""Debian's headless Chromium driven over the DevTools protocol (CDP) for page tests: no driver binary, no network.

One browser per `Chromium()` context: a fresh profile in a temporary directory, a process group of its own that is
stopped by its PID when the context ends, even when the test fails.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


class CdpError(RuntimeError):
    pass


class Chromium:
    def __init__(self, profile: Path, *, width: int = 1400, height: int = 1600, timeout: float = 30) -> None:
        self.profile = profile
        self.size = (width, height)
        self.timeout = timeout
        self.process: subprocess.Popen | None = None
        self.socket: websocket.WebSocket | None = None
        self.ids = itertools.count(1)
        self.console: list[str] = []

    def __enter__(self) -> Chromium:
        self.profile.mkdir(parents=True, exist_ok=True)
        args = [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={self.size[0]},{self.size[1]}"]
        with open(self.profile / "chromium.log", "wb") as log:
            # A session of its own, so stopping the browser also stops its renderer and helper processes.
            self.process = subprocess.Popen(
                [*args, "about:blank"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self.socket = websocket.create_connection(
                self._page_socket_url(), timeout=self.timeout, suppress_origin=True
            )
            self.send("Runtime.enable")
            self.send("Page.enable")
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _page_socket_url(self) -> str:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CdpError(f"chromium exited with {self.process.returncode}: {self.log_tail()}")
            if port_file.exists() and port_file.read_text().strip():
                port = int(port_file.read_text().split()[0])
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as response:
                        pages = [t for t in json.load(response) if t.get("type") == "page"]
                    if pages:
                        return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise CdpError(f"chromium gave no DevTools page within {self.timeout}s: {self.log_tail()}")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a CDP method and return its result; events that arrive meanwhile are kept only for the console."""
        message_id = next(self.ids)
        self.socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == message_id:
                if "error" in message:
                    raise CdpError(f"{method}: {message['error']}")
                return message.get("result", {})
            if message.get("method") == "Runtime.consoleAPICalled":
                args = message["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
            elif message.get("method") == "Runtime.exceptionThrown":
                self.console.append(f"exception: {message['params']['exceptionDetails']}")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise CdpError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def set_cookie(self, *, url: str, name: str, value: str) -> None:
        if not self.send("Network.setCookie", url=url, name=name, value=value).get("success", True):
            raise CdpError(f"cookie {name} refused for {url}")

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def wait_for(self, expression: str, *, timeout: float | None = None) -> Any:
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise CdpError(f"still false after {timeout or self.timeout}s: {expression}\nconsole: {self.console}")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.profile / "chromium.log").read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.socket is not None:
            with contextlib.suppress(Exception):
                self.socket.close()
            self.socket = None
        if self.process is None or self.process.poll() is not None:
            return
        # Chromium's renderer and GPU helpers share its process group: end the group, by the PID we started.
        pgid = os.getpgid(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            self.process.wait(5)
