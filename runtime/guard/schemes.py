"""Only http and https leave a crawl: every request — start URL, followed link, redirect, robots.txt, sitemap — whose
scheme a crawl may not use is refused before it reaches a download handler, and counted (`schemes/refused`, the
job's `refused_scheme`).

Scrapy ships handlers for `file`, `s3`, `ftp` and `data` too: a page linking to `file://<its own host>/etc/passwd`
would hand a worker's files to whoever reads the job's items. Two locks, each enough alone: the enforced
DOWNLOAD_HANDLERS name no handler for any other scheme (`download_handlers`), and `SchemeGate`, the first downloader
middleware of every crawl, refuses the request before any other middleware sees it. An admin may opt a scraper or
version in to more schemes with TRAWL_ALLOWED_SCHEMES in its settings (never a spider, a job or a source).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.settings.default_settings import DOWNLOAD_HANDLERS_BASE
from scrapy.utils.httpobj import urlparse_cached

logger = logging.getLogger(__name__)

SCHEMES_SETTING = "TRAWL_ALLOWED_SCHEMES"
WEB_SCHEMES = ("http", "https")
# The handlers of the two schemes every crawl may use: the one place they are named.
# Requests it renders go through Chromium (runtime/rendering/dispatch.py builds the rendering handler when a
# crawl first renders); the others connect through the crawl's resolver, to the addresses the guard checked
# (runtime/guard/resolver.py).
HTTP_DOWNLOAD_HANDLERS = {
    scheme: "runtime.rendering.dispatch.RenderOnDemandDownloadHandler" for scheme in ("http", "https")
}
GATE = "runtime.guard.schemes.SchemeGate"
GATE_ORDER = -(10**9)  # before every other downloader middleware, Scrapy's and a version's
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
LOGGED_SCHEMES_MAX = 10  # schemes whose first refusal a crawl logs; every refusal is counted
SCHEME_NAME = re.compile(r"^[a-z][a-z0-9+.-]{0,31}$")


class SchemeRefused(IgnoreRequest):
    """The request's scheme is not one this crawl may fetch."""


def allowed_schemes(declared: Any = None) -> tuple[str, ...]:
    """http, https and whatever an admin's TRAWL_ALLOWED_SCHEMES (a list, or a comma-separated string) adds."""
    if isinstance(declared, str):
        declared = declared.split(",")
    extra = {str(scheme).strip().lower() for scheme in declared or ()}
    return (
        *WEB_SCHEMES,
        *sorted(scheme for scheme in extra if SCHEME_NAME.match(scheme) and scheme not in WEB_SCHEMES),
    )


def download_handlers(*, allowed: Iterable[str], declared: Mapping[str, Any]) -> dict[str, str | None]:
    """The enforced DOWNLOAD_HANDLERS: http and https → HTTP_DOWNLOAD_HANDLERS; another allowed scheme → its declared
    handler (Scrapy's, or the admin's); every other scheme declared anywhere or known to Scrapy → None (no handler)."""
    allowed = set(allowed)
    handlers: dict[str, str | None] = {scheme: None for scheme in (*DOWNLOAD_HANDLERS_BASE, *declared)}
    handlers.update({scheme: declared.get(scheme) for scheme in allowed if scheme not in WEB_SCHEMES})
    handlers.update(HTTP_DOWNLOAD_HANDLERS)
    return handlers


def scheme_of(url: str) -> str:
    try:
        return urlsplit(url).scheme.lower()
    except ValueError:  # not even a URL: no scheme to allow
        return ""


class SchemeGate:
    """Refuses (SchemeRefused) and counts every request whose scheme the crawl may not fetch, and counts the
    redirects to such schemes that Scrapy's RedirectMiddleware declines to follow."""

    def __init__(self, *, allowed: Iterable[str], stats: Any) -> None:
        self.allowed = frozenset(allowed)
        self.stats = stats
        self.logged: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SchemeGate:
        return cls(allowed=allowed_schemes(crawler.settings.getlist(SCHEMES_SETTING)), stats=crawler.stats)

    def process_request(self, request: Request) -> None:
        scheme = urlparse_cached(request).scheme.lower()
        if scheme not in self.allowed:
            self._refused(scheme, request.url)
            raise SchemeRefused(
                f"{request.url}: scheme {scheme!r} is not fetched; only {', '.join(sorted(self.allowed))}"
            )
        return None

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status in REDIRECT_STATUSES and response.headers.get("Location"):
            location = response.headers["Location"].decode("latin-1")
            scheme = scheme_of(urljoin(request.url, location))
            if scheme and scheme not in self.allowed:
                self._refused(scheme, f"the redirect of {request.url}")
        return response

    def _refused(self, scheme: str, what: str) -> None:
        self.stats.inc_value("schemes/refused")
        if scheme not in self.logged and len(self.logged) < LOGGED_SCHEMES_MAX:  # a page can name thousands
            self.logged.add(scheme)
            only = ", ".join(sorted(self.allowed))
            logger.warning(
                "refused %s: scheme %r is not fetched (only %s); counted in refused_scheme", what, scheme, only
            )
