"""Rendered pages leave through the crawl's proxy (throttling/proxies.py picks one per request, Scrapy's
HttpProxyMiddleware applies it), with its credentials given to the proxy, never to the origin.

For a plain download Scrapy sends the proxy's credentials in a `Proxy-Authorization` header to the proxy only (in the
CONNECT for https). scrapy-playwright knows nothing of `meta["proxy"]`: it hands the request's headers, that one
included, to Chromium for the navigation, which would carry them to the origin, and the page would leave from the
worker's own address. Here the header is taken off the request and the page renders in a browser context of the
crawl's for that proxy (`<context>@proxy:<server>`): an unguarded crawl's context is given the proxy and its
credentials (Playwright answers the proxy's 407 with them); a guarded crawl's context goes through a guard proxy of
its own for that proxy (proxy.py), which judges each connection's target and then asks the crawl's proxy for the
checked address, sending it the credentials. Only strings go into the request's meta (it may be stored in the
frontier); the proxy's credentials stay in the handler.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request

SEPARATOR = "@proxy:"


@dataclass(frozen=True)
class Upstream:
    """The crawl's proxy a rendered request goes through."""

    server: str  # scheme://host:port, no credentials (HttpProxyMiddleware moved them to the header)
    authorization: bytes = b""  # the Proxy-Authorization value Scrapy would have sent it

    @property
    def host(self) -> str:
        return urlsplit(self.server).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.server)
        return parts.port or (443 if parts.scheme == "https" else 80)

    def open(self) -> Any:
        """A connection to the proxy (TLS for an https proxy): asyncio's (reader, writer), to await."""
        secure = urlsplit(self.server).scheme == "https"
        return asyncio.open_connection(self.host, self.port, ssl=True if secure else None, limit=64 * 1024)

    def for_playwright(self) -> dict[str, str]:
        """A browser context's `proxy` option."""
        proxy = {"server": self.server}
        scheme, _, encoded = self.authorization.partition(b" ")
        if scheme.lower() == b"basic" and encoded:
            try:
                username, _, password = base64.b64decode(encoded, validate=True).decode("latin-1").partition(":")
            except (binascii.Error, ValueError):
                return proxy
            proxy.update(username=username, password=password)
        return proxy


def request_upstream(request: Request) -> Upstream | None:
    """The request's proxy, with `Proxy-Authorization` taken off the request (it never goes to the origin)."""
    authorization = request.headers.get(b"Proxy-Authorization") or b""
    request.headers.pop(b"Proxy-Authorization", None)
    proxy = request.meta.get("proxy")
    if not proxy or urlsplit(str(proxy)).scheme not in ("http", "https"):
        return None
    parts = urlsplit(str(proxy))
    return Upstream(server=f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}", authorization=bytes(authorization))


def context_through(meta: dict[str, Any], upstream: Upstream) -> str:
    """Name the request's browser context after its proxy (a retried request may carry another proxy's name)."""
    base = str(meta.get("playwright_context") or "default").split(SEPARATOR, 1)[0]
    meta["playwright_context"] = name = f"{base}{SEPARATOR}{upstream.server}"
    return name
