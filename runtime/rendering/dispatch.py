"""The http/https download handler of every crawl (DOWNLOAD_HANDLERS, enforced: runtime/guard/schemes.py): Trawl's
CheckedHTTPDownloadHandler for every request it does not render, and the rendering handler (handler.py, on
scrapy-playwright and Playwright) for those it does — built from the same crawler the first time a request of the
crawl asks to render, and closed with this one.

Most crawls never render: built on first need, Playwright, scrapy-playwright, greenlet and pyee stay out of a
process whose crawls render nothing (~6 MiB of a pool process's RSS, bench/README.md). Nothing here imports them.

Which requests render is TRAWL_RENDER's (a scraper, version, source or the job's `render` option sets it):
`never` (nothing renders, whatever a spider's meta says), `request` (those whose meta asks: scrapy-playwright's
`playwright` or Trawl's `render`) or `always` (every request but robots.txt and those whose meta says
`playwright: False`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotSupported
from scrapy.http import Response
from twisted.internet.error import TimeoutError as DownloadTimeout

from runtime.guard.handlers import CheckedHTTPDownloadHandler

if TYPE_CHECKING:
    from runtime.rendering.handler import RenderingDownloadHandler

RENDER_MODES = ("never", "request", "always")
VALIDATORS = (b"If-None-Match", b"If-Modified-Since")
# A rendered download's bound, beyond its navigation and its wait (TRAWL_RENDER_TIMEOUT each): a page slot, a context,
# a screenshot. Past it the request fails as a download timeout (retried, or sent back to the frontier) instead of
# holding its throttle slot and its crawl forever when Chromium stops answering.
RENDER_SLACK_SECONDS = 30.0


def render_wanted(mode: str, meta: dict[str, Any]) -> bool:
    """Does a request with this meta render under TRAWL_RENDER `mode`? (robots.txt never renders: it is text.)"""
    if mode == "never":
        return False
    asked = meta.get("playwright", meta.get("render"))
    if mode == "always":
        return asked is not False and not meta.get("dont_obey_robotstxt")
    return bool(asked)


def render_mode(settings: Any) -> str:
    mode = settings.get("TRAWL_RENDER") or "request"
    if mode not in RENDER_MODES:
        raise NotSupported(f"TRAWL_RENDER is {mode!r}; one of {', '.join(RENDER_MODES)}")
    return mode


class RenderOnDemandDownloadHandler(CheckedHTTPDownloadHandler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.mode = render_mode(crawler.settings)  # a wrong value fails the crawl at its start, rendering or not
        self._renderer: RenderingDownloadHandler | None = None
        # Every crawl's stats have them (the job's `render` section), rendered or not.
        for key, zero in (("render/pages", 0), ("render/seconds", 0.0), ("render/subrequests_blocked", 0)):
            crawler.stats.set_value(key, zero)

    async def download_request(self, request: Request) -> Response:
        if not render_wanted(self.mode, request.meta):
            return await super().download_request(request)
        if any(name in request.headers for name in VALIDATORS):
            # An incremental re-crawl (runtime/incremental/cache.py) asks over HTTP first: on a 304 the stored
            # rendered page is the response, and only a page that changed is rendered again (nor does a re-crawl
            # where nothing changed start Playwright).
            answer = await super().download_request(request)
            if answer.status == 304:
                self._crawler.stats.inc_value("render/not_modified")
                return answer
        return await self._render(request)

    async def _render(self, request: Request) -> Response:
        settings = self._crawler.settings
        deadline = 2 * settings.getfloat("TRAWL_RENDER_TIMEOUT") + RENDER_SLACK_SECONDS
        try:
            async with asyncio.timeout(deadline):
                return await self.renderer().download_request(request)
        except TimeoutError as exc:  # asyncio's, the deadline's: Playwright's own timeouts are its Error
            self._crawler.stats.inc_value("render/deadline_passed")
            raise DownloadTimeout(f"rendering {request.url} took longer than {deadline:.0f} s") from exc

    def renderer(self) -> RenderingDownloadHandler:
        if self._renderer is None:
            from runtime.rendering.handler import RenderingDownloadHandler  # Playwright: only when rendering

            self._renderer = RenderingDownloadHandler.from_crawler(self._crawler)
        return self._renderer

    async def close(self) -> None:
        try:
            await super().close()
        finally:  # the crawl's browser contexts (and, with the last one, the worker's Chromium) close whatever happened
            if self._renderer is not None:
                await self._renderer.close()
