"""The rule for what a rendered page may fetch by itself (scripts, XHR, fetch, iframes, images, redirects): the same
rule as the crawl's own requests, decided by the same functions — the scheme rule (runtime/guard/schemes.py) and,
for guarded crawls, the private-target guard's resolution (runtime/guard/resolver.py) — plus the resource types a
crawl does not download (images, fonts and media unless TRAWL_RENDER_RESOURCES lists them).

The route's check refuses early, with a clear log line; what makes it hold is the guarded crawl's proxy (proxy.py):
Chromium connects only through it, it connects only to the addresses this same resolution judged, and a redirect's
target — which Chromium follows without routing it — is judged there when Chromium connects to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import Request as PlaywrightRequest
from playwright.async_api import Route

from runtime.guard.resolver import CrawlResolver
from runtime.guard.schemes import scheme_of

logger = logging.getLogger("trawl.render")

SKIPPABLE_RESOURCES = frozenset({"image", "font", "media"})
# Chromium builds these in the page; no request leaves the machine for them.
IN_PAGE_SCHEMES = frozenset({"data", "blob", "about"})
LOGGED_REFUSALS_MAX = 10


@dataclass
class SubrequestRule:
    """What one crawl's rendered pages may fetch."""

    allowed_schemes: frozenset[str]
    resolver: CrawlResolver | None  # guarded crawls only
    resources: frozenset[str]  # resource types downloaded though skippable
    stats: Any
    logged: int = 0

    @classmethod
    def of(
        cls, *, allowed_schemes: Iterable[str], resolver: CrawlResolver | None, resources: Iterable[str], stats: Any
    ) -> SubrequestRule:
        guarded = resolver if resolver is not None and resolver.guarded else None
        return cls(frozenset(allowed_schemes), guarded, frozenset(str(kind).lower() for kind in resources), stats)

    @property
    def guarded(self) -> bool:
        return self.resolver is not None

    async def refusal(self, url: str) -> str:
        """Why the page may not fetch `url` ("" when it may)."""
        scheme = scheme_of(url)
        if scheme in IN_PAGE_SCHEMES:
            return ""
        if scheme not in self.allowed_schemes:
            return f"scheme {scheme!r} is not fetched"
        if self.resolver is None:
            return ""
        return (await self.resolver.resolve(urlsplit(url).hostname or "")).reason

    def skipped(self, request: PlaywrightRequest) -> bool:
        if request.resource_type in SKIPPABLE_RESOURCES and request.resource_type not in self.resources:
            self.stats.inc_value("render/resources_skipped")
            return True
        return False

    def refused(self, url: str, reason: str) -> None:
        self.stats.inc_value("render/subrequests_blocked")
        if self.logged < LOGGED_REFUSALS_MAX:  # a page can make thousands
            self.logged += 1
            logger.warning("a rendered page's request to %s was refused: %s", url[:300], reason)


async def route_checked(route: Route, request: PlaywrightRequest, rule: SubrequestRule) -> Route | None:
    """The route to go on with, or None when the request was refused or skipped (and aborted)."""
    reason = await rule.refusal(request.url)
    if reason:
        rule.refused(request.url, reason)
        await route.abort("blockedbyclient")
        return None
    if rule.skipped(request):
        await route.abort("blockedbyclient")
        return None
    return route
