"""Serving the demo shop on 127.0.0.1: `python -m demo.serve --port 8001 --dir demo/site`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from demo.generate import SITE_DIR, generate_site, robots_txt


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # Crawlers and browsers hang up mid-response all the time; that is not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def site_ensure(root: Path, base_url: str, **generate_kwargs) -> bool:
    """Generate the site unless it is already there for this address (its sitemap URLs must match). True if written."""
    robots = root / "robots.txt"
    if (root / "index.html").exists() and robots.exists() and robots.read_text() == robots_txt(base_url.rstrip("/")):
        return False
    generate_site(root, base_url, **generate_kwargs)
    return True


class DemoServer:
    """The shop on a real socket. Port 0 picks a free port; `url` tells which. Usable as a context manager."""

    def __init__(self, root: Path, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.root = Path(root)
        self.httpd = QuietServer((host, port), partial(QuietHandler, directory=str(self.root)))
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> DemoServer:
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="demo-shop", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.thread is not None:
            self.httpd.shutdown()
            self.thread.join(5)
        self.httpd.server_close()

    def __enter__(self) -> DemoServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve the demo shop (generated first if missing).")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--dir", type=Path, default=SITE_DIR, help="folder holding the site")
    args = parser.parse_args(argv)
    try:
        server = DemoServer(args.dir, port=args.port)
    except OSError as exc:
        print(f"demo shop: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    site_ensure(args.dir, server.url)
    # A launcher stops us with SIGTERM; end the same clean way as Ctrl-C. SIGINT too is set here: a script that
    # starts us in the background (`python -m demo.serve &`) hands SIGINT down ignored, and Python keeps it so.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, signal.default_int_handler)
    print(f"demo shop at {server.url}/ (serving {args.dir})", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
