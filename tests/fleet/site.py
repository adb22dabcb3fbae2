"""A site on the fleet's bridge that every host reaches: serves a folder and records each hit with its time and the
address it came from, so a test can say which host fetched what, and when."""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from tests.sites import ServedSite


class FleetSite(ServedSite):
    def __init__(self, root: Path, *, host: str) -> None:
        self.root = root
        self.hits: Counter = Counter()
        self.arrivals: list[tuple[float, str, str]] = []  # (time.time(), client address, path)
        self.lock = threading.Lock()
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(site.root), **kwargs)

            def do_GET(self):
                with site.lock:
                    site.hits[self.path] += 1
                    site.arrivals.append((time.time(), self.client_address[0], self.path))
                return super().do_GET()

            def log_message(self, *args):
                pass

        super().__init__(Handler, host=host)

    def pages(self) -> set[str]:
        return {f"/{path.relative_to(self.root)}" for path in self.root.rglob("*.html")}

    def fetched_from(self, address: str, *, after: float = 0.0) -> list[tuple[float, str]]:
        with self.lock:
            return [(at, path) for at, client, path in self.arrivals if client == address and at > after]

    def first_arrival_not_from(self, address: str) -> float | None:
        with self.lock:
            return next((at for at, client, _ in self.arrivals if client != address), None)
