"""Serve a directory from memory, fast enough not to be a benchmark's bottleneck.

`python bench/_serve.py ROOT [--hits FILE] [--delay SECONDS]` binds a free port on 127.0.0.1, prints it on one line,
and serves until killed. Every file is read once at start; HTTP/1.1 keep-alive spares a TCP handshake per request.
With --hits, the path of every request is appended to that file, one per line, as it arrives (to count pages fetched
twice). With --delay, every answer waits that long first, as a real site's server does (requests in flight wait side
by side). With --hosts, the same files are served on each of those loopback addresses (127.x.y.z), all on one port:
each address is a site of its own to a crawler (Scrapy's download slots and Trawl's throttle key on the host, not the
port), and every hit is logged as `<time.monotonic()> <address> <path>`.

One asyncio loop in one thread: http.server's thread per connection made every request wait for the GIL to change
hands between the connection threads, which capped plain Scrapy at ~230 pages/s on a 2-vCPU box while using half a
core; on this server the crawler is what runs out of CPU (~600 pages/s).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

CONTENT_TYPES = {".html": b"text/html; charset=utf-8", ".txt": b"text/plain; charset=utf-8"}
NOT_FOUND = (b"not found", b"text/plain", b"404 Not Found")


def load(root: Path) -> dict[str, tuple[bytes, bytes, bytes]]:
    return {
        "/" + path.relative_to(root).as_posix(): (
            path.read_bytes(),
            CONTENT_TYPES.get(path.suffix, b"text/plain"),
            b"200 OK",
        )
        for path in root.rglob("*")
        if path.is_file()
    }


def handler_for(files: dict[str, tuple[bytes, bytes, bytes]], hits: str = "", delay: float = 0, stamped: bool = False):
    log = open(hits, "a", buffering=1) if hits else None  # noqa: SIM115 - open as long as the server runs

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another on this connection
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode("latin-1").split("?", 1)[0]
                if log is not None and stamped:
                    log.write(f"{time.monotonic():.4f} {writer.get_extra_info('sockname')[0]} {path}\n")
                elif log is not None:
                    log.write(path + "\n")
                if delay:
                    await asyncio.sleep(delay)
                body, content_type, status = files.get(path, NOT_FOUND)
                writer.write(
                    b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                    % (status, content_type, len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, IndexError):
            pass  # the client closed the connection (a crawler stopped mid-crawl drops them) or sent garbage
        finally:
            writer.close()

    return handle


async def serve(args: argparse.Namespace) -> None:
    hosts = args.hosts.split(",") if args.hosts else ["127.0.0.1"]
    handle = handler_for(load(args.root), args.hits, args.delay, stamped=bool(args.hosts))
    first = await asyncio.start_server(handle, hosts[0], 0)
    port = first.sockets[0].getsockname()[1]
    servers = [first, *[await asyncio.start_server(handle, host, port) for host in hosts[1:]]]
    print(port, flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--hits", default="", help="append every request's path to this file")
    parser.add_argument("--delay", type=float, default=0, help="seconds every answer waits")
    parser.add_argument("--hosts", default="", help="comma-separated loopback addresses to serve on (one port)")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
