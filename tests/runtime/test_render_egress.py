"""A rendered request's proxy (runtime/rendering/egress.py): its credentials come off the request (the origin never
gets them) and go to the browser context's proxy settings; the context is named after the proxy, once. End to end,
through a proxy asking for credentials: tests/security/test_render_bounds.py."""

from __future__ import annotations

import base64

from scrapy import Request

from runtime.rendering.egress import Upstream, context_through, request_upstream


def proxied(url: str = "https://shop.example/", *, proxy: str = "http://10.0.0.5:3128") -> Request:
    """A request as Scrapy's HttpProxyMiddleware leaves it: the proxy in meta, its credentials in a header."""
    credentials = base64.b64encode(b"team:s3cret:with-colon").decode()
    return Request(url, meta={"proxy": proxy}, headers={"Proxy-Authorization": f"Basic {credentials}"})


def test_the_credentials_leave_the_request_for_the_contexts_proxy_settings():
    request = proxied()
    upstream = request_upstream(request)

    assert b"Proxy-Authorization" not in request.headers
    assert upstream.for_playwright() == {
        "server": "http://10.0.0.5:3128",
        "username": "team",
        "password": "s3cret:with-colon",
    }
    assert (upstream.host, upstream.port) == ("10.0.0.5", 3128)


def test_a_request_without_a_proxy_still_loses_a_stray_proxy_authorization():
    request = Request("https://shop.example/", headers={"Proxy-Authorization": "Basic eDp5"})
    assert request_upstream(request) is None
    assert b"Proxy-Authorization" not in request.headers


def test_the_context_is_named_after_the_proxy_once_even_when_a_retry_changes_it():
    meta = {"playwright_context": "session-1"}
    assert context_through(meta, Upstream("http://10.0.0.5:3128")) == "session-1@proxy:http://10.0.0.5:3128"
    assert context_through(meta, Upstream("http://10.0.0.6:3128")) == "session-1@proxy:http://10.0.0.6:3128"
    assert context_through({}, Upstream("http://10.0.0.6:3128")) == "default@proxy:http://10.0.0.6:3128"
