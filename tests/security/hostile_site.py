"""The attacker's own "public" site (on ATTACKER_HOST, see tests/security/conftest.py) for the scheme and
custom_settings attacks: fixed routes — a page, a redirect, a robots.txt, a sitemap — and a count of every hit."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.security.conftest import ATTACKER_HOST


class HostileSite:
    """`routes` maps a path to (status, headers, body). Paths not listed are 404."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], str]]) -> None:
        self.routes = routes
        self.hits: Counter = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits[self.path] += 1
                status, headers, body = site.routes.get(self.path, (404, {}, "not here"))
                data = body.encode()
                self.send_response(status)
                for name, value in {"Content-Type": "text/html", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((ATTACKER_HOST, 0), Handler)
        self.url = f"http://{ATTACKER_HOST}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HostileSite:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def page(*links: str, title: str = "Page") -> str:
    anchors = "".join(f'<a href="{link}">link</a>' for link in links)
    return f"<html><title>{title}</title><body>{anchors}</body></html>"


def redirect(location: str) -> tuple[int, dict[str, str], str]:
    return 302, {"Location": location}, ""
