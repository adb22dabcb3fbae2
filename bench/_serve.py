"""Serve a directory from memory, fast enough not to be a benchmark's bottleneck.

`python bench/_serve.py ROOT [--hits FILE] [--delay SECONDS]` binds a free port on 127.0.0.1, prints it on one line,
and serves until killed. Every file is read once at start; HTTP/1.1 keep-alive spares a TCP handshake per request.
With --hits, the path of every request is appended to that file, one per line, as it arrives (to count pages fetched
twice). With --delay, every answer waits that long first, as a real site's server does (a thread per connection, so
requests in flight wait side by side).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8"}


def load(root: Path) -> dict[str, tuple[bytes, str]]:
    return {
        "/" + path.relative_to(root).as_posix(): (path.read_bytes(), CONTENT_TYPES.get(path.suffix, "text/plain"))
        for path in root.rglob("*")
        if path.is_file()
    }


def handler_for(files: dict[str, tuple[bytes, str]], hits: str = "", delay: float = 0) -> type[BaseHTTPRequestHandler]:
    log = open(hits, "a", buffering=1) if hits else None  # noqa: SIM115 - open as long as the server runs
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if log is not None:
                with lock:
                    log.write(path + "\n")
            body, content_type = files.get(path, (b"not found", "text/plain"))
            if delay:
                time.sleep(delay)
            self.send_response(200 if path in files else 404)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A crawler stopped mid-crawl drops its connections: not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--hits", default="", help="append every request's path to this file")
    parser.add_argument("--delay", type=float, default=0, help="seconds every answer waits")
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), handler_for(load(args.root), args.hits, args.delay))
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
