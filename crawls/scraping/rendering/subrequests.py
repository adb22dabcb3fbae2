"""The rule for what a rendered page may fetch by itself (scripts, XHR, fetch, iframes, images, redirects): the same
rule as the crawl's own requests, decided by the same functions — the scheme rule (crawls/scraping/schemes.py) and,
for guarded crawls, the private-target guard's resolution (crawls/scraping/resolver.py) — plus the resource types a
crawl does not download (images, fonts and media unless TRAWL_RENDER_RESOURCES lists them).

Chromium follows redirects by itself and Playwright routes only a redirect chain's first request, so in a guarded
crawl every sub-request is fetched from the route (no redirects followed) and a redirect is handed back to Chromium
only once its target passed the rule; Chromium's request for that target comes through the route again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from playwright.async_api import Request as PlaywrightRequest
from playwright.async_api import Route

from crawls.scraping.resolver import CrawlResolver
from crawls.scraping.schemes import REDIRECT_STATUSES, scheme_of

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


class CheckedRoute:
    """A Playwright route whose `continue_` obeys the rule all the way through redirects (guarded crawls)."""

    def __init__(self, route: Route, rule: SubrequestRule) -> None:
        self._route = route
        self._rule = rule

    def __getattr__(self, name: str) -> Any:
        return getattr(self._route, name)

    async def continue_(self, **overrides: Any) -> None:
        if not self._rule.guarded:
            return await self._route.continue_(**overrides)
        response = await self._route.fetch(max_redirects=0, **overrides)
        location = response.headers.get("location")
        if response.status in REDIRECT_STATUSES and location:
            target = urljoin(self._route.request.url, location)
            reason = await self._rule.refusal(target)
            if reason:
                self._rule.refused(target, reason)
                return await self._route.abort("blockedbyclient")
        await self._route.fulfill(response=response)


async def route_checked(route: Route, request: PlaywrightRequest, rule: SubrequestRule) -> Route | None:
    """The route to go on with (a CheckedRoute), or None when the request was refused or skipped (and aborted)."""
    reason = await rule.refusal(request.url)
    if reason:
        rule.refused(request.url, reason)
        await route.abort("blockedbyclient")
        return None
    if rule.skipped(request):
        await route.abort("blockedbyclient")
        return None
    return CheckedRoute(route, rule)
