"""A local site that goes wrong on purpose: pages answering 500, and a page that never answers."""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

from tests.sites import ServedSite, send_body

BROKEN_PAGES = 200


class TroubleSite(ServedSite):
    """`/broken` links to BROKEN_PAGES pages that answer 500; `/stalls` links to `/hang`, which answers nothing for
    `hang_seconds`. Counts every hit by path prefix."""

    def __init__(self, *, hang_seconds: float = 120) -> None:
        self.hits: Counter = Counter()
        self.release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits[self.path.split("/")[1]] += 1
                if self.path == "/broken":
                    links = "".join(f'<a href="/error/{n}">{n}</a>' for n in range(BROKEN_PAGES))
                    return self.answer(200, f"<html><title>Broken</title>{links}</html>")
                if self.path == "/stalls":
                    return self.answer(200, '<html><title>Stalls</title><a href="/hang">next</a></html>')
                if self.path.startswith("/hang"):
                    site.release.wait(hang_seconds)  # the connection stays open, nothing is sent
                    return None
                return self.answer(500 if self.path.startswith("/error/") else 404, "<html>no</html>")

            def answer(self, status: int, body: str) -> None:
                send_body(self, status, body)

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    def __exit__(self, *exc) -> None:
        self.release.set()
        time.sleep(0.1)
        super().__exit__(*exc)
