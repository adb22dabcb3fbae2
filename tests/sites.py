"""Local HTTP sites for tests: real sockets on 127.0.0.1, never the internet."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

Route = tuple[int, str | bytes]  # (status, body) a path answers


class ServedSite:
    """Serves a request handler class, or a dict of routes ({path: (status, body)}, 404 elsewhere), on a free port of
    the loopback in a thread, from `with` until its end (even when the test fails). Every test's local HTTP site or
    webhook receiver is one of these; a subclass makes its handler and passes it to `__init__`."""

    def __init__(
        self, handler: type[BaseHTTPRequestHandler] | Mapping[str, Route], *, host: str = "127.0.0.1", path: str = ""
    ) -> None:
        self.host = host
        self.url_path = path  # appended to `url` (a receiver's "/hook")
        self.server = ThreadingHTTPServer((host, 0), handler if isinstance(handler, type) else routes_handler(handler))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.url_path}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def send_body(
    handler: BaseHTTPRequestHandler, status: int, body: str | bytes, headers: Mapping[str, str] | None = None
) -> None:
    """One whole answer from a test site's handler: status, headers (text/html unless they say otherwise), body."""
    data = body.encode() if isinstance(body, str) else body
    handler.send_response(status)
    for name, value in {"Content-Type": "text/html", **(headers or {})}.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def routes_handler(routes: Mapping[str, Route]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            send_body(self, *routes.get(self.path, (404, "not found")))

        def log_message(self, *args):
            pass

    return Handler


def write_catalogue(root: Path, *, products: int = 12, per_page: int = 5, price_of=lambda n: f"{10 + n}.00") -> None:
    """A tiny shop: /index.html lists paginated /list-N.html pages that link to /product-N.html pages."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    pages = max(1, -(-products // per_page))
    for page in range(1, pages + 1):
        numbers = range((page - 1) * per_page + 1, min(page * per_page, products) + 1)
        cards = "".join(
            f'<div class="card"><a class="product" href="/product-{n}.html">Product {n}</a></div>' for n in numbers
        )
        nxt = f'<a class="next" href="/list-{page + 1}.html">next</a>' if page < pages else ""
        (root / f"list-{page}.html").write_text(f"<html><title>List {page}</title><body>{cards}{nxt}</body></html>")
    for n in range(1, products + 1):
        (root / f"product-{n}.html").write_text(
            f'<html><title>Product {n}</title><body><h1>Product {n}</h1><span class="price">{price_of(n)}</span>'
            f'<img src="/img/{n}.png"><a href="/list-1.html">back</a></body></html>'
        )
    (root / "index.html").write_text('<html><title>Shop</title><body><a href="/list-1.html">All</a></body></html>')


class LocalSite(ServedSite):
    """Serves a directory, plus `/slow/N`: an endless chain of slow pages for timeout tests. Counts every hit."""

    def __init__(self, root: Path, *, slow_delay: float = 0.3) -> None:
        self.root = root
        self.hits: Counter = Counter()
        self.slow_delay = slow_delay
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(site.root), **kwargs)

            def do_GET(self):
                site.hits[self.path] += 1
                if self.path.startswith("/slow/"):
                    return self.slow_page()
                return super().do_GET()

            def slow_page(self):
                time.sleep(site.slow_delay)
                number = int(self.path.rsplit("/", 1)[-1] or 0)
                body = f'<html><title>Slow {number}</title><a href="/slow/{number + 1}">next</a></html>'.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    def slow_hits(self) -> int:
        return sum(count for path, count in self.hits.items() if path.startswith("/slow/"))


class LoadedSite(ServedSite):
    """A site whose answers depend on how hard it is hit: `/<hub>/0` links to `/<hub>/1..leaves`; `answer(site, path,
    now)` says how long to take and which status to send. Every arrival is recorded with its status and the delay it
    was given, so a test reads what the site went through from the site's own log."""

    def __init__(self, *, leaves: int, answer: Callable[[LoadedSite, str, float], tuple[float, int]]) -> None:
        self.leaves = leaves
        self.answer = answer
        self.arrivals: list[tuple[float, int, float, str]] = []  # (time, status, delay, path)
        self.lock = threading.Lock()
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self):
                now = time.time()
                with site.lock:
                    delay, status = site.answer(site, self.path, now)
                    site.arrivals.append((now, status, delay, self.path))
                time.sleep(delay)
                body = site.page(self.path).encode() if status == 200 else b"overloaded"
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        # By name, so its throttle rule ("localhost") touches no other test's site on 127.0.0.1.
        super().__init__(Handler, host="localhost")

    def recent(self, now: float, seconds: float = 1.0) -> int:
        """Requests that arrived in the last `seconds` (call with the lock held)."""
        return sum(1 for at, *_ in reversed(self.arrivals[-200:]) if now - seconds < at)

    def page(self, path: str) -> str:
        if path == "/robots.txt":
            return "User-agent: *\nDisallow:\n"
        hub, _, number = path.strip("/").partition("/")
        links = "".join(f'<a href="/{hub}/{n}">{n}</a> ' for n in range(1, self.leaves + 1)) if number == "0" else ""
        return f"<html><title>{hub} {number}</title><body>{links}</body></html>"

    def log(self, *, since: float = 0.0, until: float = float("inf")) -> list[tuple[float, int, float, str]]:
        with self.lock:
            return [entry for entry in self.arrivals if since <= entry[0] < until]

    def served(self, hubs: tuple[str, ...]) -> float:
        """The share of the hubs' leaves the site answered with a page at least once."""
        wanted = {f"/{hub}/{n}" for hub in hubs for n in range(1, self.leaves + 1)}
        return len(wanted & {path for _, status, _, path in self.log() if status == 200}) / len(wanted)
