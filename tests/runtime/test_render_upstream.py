"""A guarded crawl's guard proxy in front of the crawl's own proxy (runtime/rendering/proxy.py with an Upstream):
Chromium's `CONNECT host:port` is judged with the crawl's resolver, then the crawl's proxy is asked for the checked
address with the proxy's credentials; a refused target never reaches the crawl's proxy. Real sockets on the
loopback; the https page itself is in tests/security/test_render_bounds.py's http twin (Chromium would refuse a
test certificate)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections import Counter

from runtime.guard.resolver import CrawlResolver
from runtime.rendering.egress import Upstream
from runtime.rendering.proxy import GuardProxy
from runtime.rendering.subrequests import SubrequestRule

HOST = "127.0.0.2"  # allowed; 127.0.0.1 stands for the private network
CREDENTIALS = b"Basic " + base64.b64encode(b"team:s3cret")


class Stats(Counter):
    def inc_value(self, key: str, count: int = 1) -> None:
        self[key] += count


async def serve(handler, host: str = HOST) -> asyncio.Server:
    return await asyncio.start_server(handler, host, 0)


def port_of(server: asyncio.Server) -> int:
    return server.sockets[0].getsockname()[1]


async def connect_through_guard() -> tuple[list[bytes], str, str]:
    """A client asks the guard proxy for a tunnel to an allowed and to a private target; what the crawl's proxy was
    asked, and what each client got."""
    asked: list[bytes] = []

    async def target(reader, writer):
        await reader.readline()
        writer.write(b"hello from the target\n")
        await writer.drain()
        writer.close()

    async def crawls_proxy(reader, writer):  # a CONNECT proxy asking for credentials
        head = await reader.readuntil(b"\r\n\r\n")
        asked.append(head)
        if b"Proxy-Authorization: " + CREDENTIALS not in head:
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
            writer.close()
            return
        host, _, port = head.split(b" ")[1].decode().rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        writer.write(await _relay(reader, up_reader, up_writer))
        await writer.drain()
        writer.close()

    allowed, private, upstream = await serve(target), await serve(target, "127.0.0.1"), await serve(crawls_proxy)
    resolver = CrawlResolver(guarded=True, allowed=[f"{HOST}/32"], servers=[])
    rule = SubrequestRule.of(allowed_schemes=("http", "https"), resolver=resolver, resources=(), stats=Stats())
    guard = GuardProxy(
        resolver=resolver, rule=rule, upstream=Upstream(f"http://{HOST}:{port_of(upstream)}", CREDENTIALS)
    )
    try:
        await guard.start()
        answers = [await _client(guard.url, f"{HOST}:{port_of(allowed)}")]
        answers.append(await _client(guard.url, f"127.0.0.1:{port_of(private)}"))
        return asked, *answers
    finally:
        await guard.close()
        for server in (allowed, private, upstream):
            server.close()


async def _relay(reader, up_reader, up_writer) -> bytes:
    up_writer.write(await reader.readline())
    await up_writer.drain()
    answer = await up_reader.read()
    up_writer.close()
    return answer


async def _client(guard_url: str, target: str) -> str:
    host, port = guard_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    status = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " in status:
        writer.write(b"hi\n")
        await writer.drain()
        status += await reader.read()
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return status.decode()


def test_a_tunnel_goes_through_the_crawls_proxy_to_the_checked_address_with_its_credentials():
    asked, allowed, private = asyncio.run(connect_through_guard())

    assert "200" in allowed.splitlines()[0] and "hello from the target" in allowed
    assert len(asked) == 1  # the private target never reached the crawl's proxy
    assert asked[0].startswith(f"CONNECT {HOST}:".encode()) and b"Proxy-Authorization: " + CREDENTIALS in asked[0]
    assert "403" in private.splitlines()[0]
