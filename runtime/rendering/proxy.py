"""The forward proxy a guarded crawl's browser contexts go through: Chromium only ever connects to an address Trawl
checked (no DNS-rebinding window on rendered pages).

Without it, the sub-request rule (subrequests.py) resolves a host to judge it, and Chromium — or Playwright's own
fetch — resolves it again to connect: a hostile name can answer a public address to the check and a private one to
the connection. With a proxy, Chromium does no DNS of its own: it hands the proxy the host name (CONNECT host:port for
https, an absolute-form request for http), and the proxy resolves it with the crawl's resolver (the guard's, one
cached resolution for check and connection: runtime/guard/resolver.py), judges the very addresses it connects to,
and tunnels the bytes. A refused target gets a 403 and counts as a blocked sub-request.

One proxy per guarded crawl, on 127.0.0.1 and an ephemeral port, started with the crawl's first context and closed
with the crawl. Playwright makes Chromium send loopback requests through a context's proxy too (`<-loopback>`), so a
page cannot reach 127.0.0.1 around it. Unguarded crawls (admins, scheduled work) connect directly: the proxy only
adds a hop where it closes a hole.

A guarded crawl whose requests go through one of its proxies (egress.py) gets one guard proxy per proxy: it judges
the target as above, then asks the crawl's proxy for the checked address (`CONNECT address:port`, or an absolute-form
request to it) with the proxy's credentials, which Chromium never sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import urlsplit

from runtime.guard.resolver import CrawlResolver
from runtime.rendering.egress import Upstream
from runtime.rendering.subrequests import SubrequestRule

logger = logging.getLogger("trawl.render")

HEAD_LIMIT = 64 * 1024  # bytes of a request line and headers; Chromium's are far smaller
CONNECT_TIMEOUT = 10.0
CHUNK = 64 * 1024
HOP_BY_HOP = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


class ProxyRefusal(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.http_status = status


class GuardProxy:
    """Resolves, judges and tunnels one crawl's rendered connections."""

    def __init__(self, *, resolver: CrawlResolver, rule: SubrequestRule, upstream: Upstream | None = None) -> None:
        self.resolver = resolver
        self.rule = rule
        self.upstream = upstream
        self._server: asyncio.Server | None = None
        self._tunnels: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def start(self) -> str:
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=HEAD_LIMIT)
        return self.url

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._tunnels):
            task.cancel()
        await asyncio.gather(*self._tunnels, return_exceptions=True)
        await server.wait_closed()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tunnels.add(task := asyncio.ensure_future(self._serve(reader, writer)))
        task.add_done_callback(self._tunnels.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, _, headers = head.partition(b"\r\n")
            method, target, version = request_line.split(b" ", 2)
            if method == b"CONNECT":
                host, port, url = _authority(target.decode("latin-1"))
            else:
                host, port, url = _absolute(target.decode("latin-1"))
            tunnel = method == b"CONNECT"
            upstream_reader, upstream, address = await self._connect(host, port, url, tunnel=tunnel)
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            elif self.upstream is not None:  # the crawl's proxy fetches the checked address
                upstream.write(_origin_form(method, url, version, headers, via=(self.upstream, address, port)))
            else:
                upstream.write(_origin_form(method, url, version, headers))
                writer.write(_closing(await upstream_reader.readuntil(b"\r\n\r\n")))
            await _splice(reader, writer, upstream_reader, upstream)
        except ProxyRefusal as refusal:
            status = f"HTTP/1.1 {refusal.http_status} Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            writer.write(status.encode())
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, ConnectionError):
            pass  # a malformed or abandoned request: nothing to answer
        finally:
            for end in (upstream, writer):
                if end is not None:
                    end.close()

    async def _connect(
        self, host: str, port: int, url: str, *, tunnel: bool
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
        """A connection to one of the addresses the resolution that was judged gave (never a fresh lookup), or to the
        crawl's proxy asked for one of them (a tunnel to it already set up for CONNECT)."""
        resolution = await self.resolver.resolve(host)
        if resolution.reason:
            self.rule.refused(url, resolution.reason)
            raise ProxyRefusal(403, resolution.reason)
        for address in resolution.addresses:
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                if self.upstream is None:
                    connecting = asyncio.open_connection(address, port, limit=CHUNK)
                elif tunnel:
                    connecting = _tunnel_through(self.upstream, address, port)
                else:
                    connecting = self.upstream.open()
                return (*await asyncio.wait_for(connecting, CONNECT_TIMEOUT), address)
        raise ProxyRefusal(502, f"no address of {host!r} answers")


def _authority(target: str) -> tuple[str, int, str]:
    parts = urlsplit(f"https://{target}")
    return parts.hostname or "", parts.port or 443, f"https://{target}/"


def _absolute(target: str) -> tuple[str, int, str]:
    parts = urlsplit(target)
    if parts.scheme != "http" or not parts.hostname:
        raise ProxyRefusal(400, f"not an absolute http URL: {target[:200]!r}")
    return parts.hostname, parts.port or 80, target


def _origin_form(
    method: bytes, url: str, version: bytes, headers: bytes, *, via: tuple[Upstream, str, int] | None = None
) -> bytes:
    """The request as the origin expects it, one request per upstream connection (`Connection: close`); `via` the
    crawl's proxy: in absolute form naming the checked address (the Host header keeps the name), with its
    credentials."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = (line for line in headers.split(b"\r\n") if line)
    kept = [line for line in lines if line.split(b":", 1)[0].strip().lower() not in HOP_BY_HOP]
    if via is not None:
        upstream, address, port = via
        path = f"http://{_host_port(address, port)}{path}"
        kept += [b"Proxy-Authorization: " + upstream.authorization] if upstream.authorization else []
    return b"\r\n".join([b" ".join([method, path.encode("latin-1"), version]), *kept, b"Connection: close", b"", b""])


def _host_port(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


async def _tunnel_through(
    upstream: Upstream, address: str, port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A tunnel to address:port through the crawl's proxy (CONNECT with its credentials)."""
    reader, writer = await upstream.open()
    target = _host_port(address, port).encode()
    head = [b"CONNECT " + target + b" HTTP/1.1", b"Host: " + target]
    head += [b"Proxy-Authorization: " + upstream.authorization] if upstream.authorization else []
    writer.write(b"\r\n".join([*head, b"", b""]))
    answer = await reader.readuntil(b"\r\n\r\n")
    status = answer.split(b" ", 2)[1] if answer.count(b" ") >= 1 else b""
    if status != b"200":
        writer.close()
        raise ProxyRefusal(502, f"the crawl's proxy refused the tunnel ({status.decode('latin-1')[:3]})")
    return reader, writer


def _closing(head: bytes) -> bytes:
    """The response's head, telling Chromium that this connection ends with it: its next request, to whichever host,
    comes on a new connection (resolved and judged afresh), never down this one's upstream."""
    status, _, headers = head.partition(b"\r\n")
    lines = (line for line in headers.split(b"\r\n") if line)
    kept = [line for line in lines if line.split(b":", 1)[0].strip().lower() not in HOP_BY_HOP]
    return b"\r\n".join([status, *kept, b"Connection: close", b"Proxy-Connection: close", b"", b""])


async def _splice(
    client_reader: asyncio.StreamReader,
    client: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream: asyncio.StreamWriter,
) -> None:
    """Copy both ways until the upstream is done (a client's half-close is passed on; the tunnel ends with the
    upstream, so an http request's connection never carries a second request to another host)."""
    sending = asyncio.ensure_future(_copy(client_reader, upstream))
    try:
        await _copy(upstream_reader, client)
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sending


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        return
