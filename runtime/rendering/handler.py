"""How a crawl renders: scrapy-playwright's download handler, so a request it renders is rendered the way the Scrapy
ecosystem does it (`meta={"playwright": True}`, page methods, `playwright_include_page` ...). Only the requests the
crawl's http/https handler (dispatch.py) decided to render reach it; that handler builds it the first time one does.

A rendered request went through the downloader middlewares like any other (scheme gate, guard, throttle token); the
page's own requests pass runtime/rendering/subrequests.py.

The crawl's pages open in browser contexts of its own on the worker's shared browser (browser.py), closed with the
crawl; pages open at once are bounded per worker process (TRAWL_RENDER_MAX_PAGES) and per crawl (scrapy-playwright's
PLAYWRIGHT_MAX_PAGES_PER_CONTEXT, by default the crawl's CONCURRENT_REQUESTS). What a page may make the worker hold
— its HTML up to TRAWL_RENDER_MAXSIZE, no download, no popup — is bounds.py's; a request with a proxy renders in a
context through that proxy, its credentials never sent to the origin (egress.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Route
from playwright.async_api import Request as PlaywrightRequest
from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import NotSupported
from scrapy.http import Response
from scrapy_playwright.handler import BrowserContextWrapper, ScrapyPlaywrightDownloadHandler

from runtime.guard.resolver import crawl_resolver
from runtime.guard.schemes import SCHEMES_SETTING, allowed_schemes
from runtime.rendering.bounds import PopupCloser, body_bounded
from runtime.rendering.browser import BrowserConfig, worker_browser
from runtime.rendering.egress import Upstream, context_through, request_upstream
from runtime.rendering.proxy import GuardProxy
from runtime.rendering.screenshots import Screenshots
from runtime.rendering.subrequests import SubrequestRule, route_checked

logger = logging.getLogger("trawl.render")


class _HandlerCloseNoise(logging.Filter):
    """Scrapy builds one handler per scheme (http and https), so scrapy-playwright's "Closing download handler"
    came up to twice at the end of a rendered job's log: it says nothing a reader of the log needs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Closing download handler"


logging.getLogger("scrapy-playwright").addFilter(_HandlerCloseNoise())

NETWORK_IDLE = "networkidle"
SERVER_LATENCY = "render_server_latency"  # meta: seconds to the document's first byte


class RenderingDownloadHandler(ScrapyPlaywrightDownloadHandler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self.wait_for = settings.get("TRAWL_RENDER_WAIT_FOR") or ""
        # Unset (a crawl built without Trawl's settings, as some tests do): Playwright's own 30 s.
        self.timeout_ms = settings.getfloat("TRAWL_RENDER_TIMEOUT") * 1000 or None
        self.config.navigation_timeout_ms = self.timeout_ms
        self.browser_config = BrowserConfig.from_settings(settings)
        self.rule = SubrequestRule.of(
            allowed_schemes=allowed_schemes(settings.getlist(SCHEMES_SETTING)),
            resolver=crawl_resolver(crawler),
            resources=settings.getlist("TRAWL_RENDER_RESOURCES"),
            stats=crawler.stats,
        )
        # A guarded crawl's pages connect through its proxy only: one resolution for the check and the connection.
        self.proxy = GuardProxy(resolver=self.rule.resolver, rule=self.rule) if self.rule.resolver else None
        self.screenshots = Screenshots.from_crawler(crawler)
        self.body_max = settings.getint("TRAWL_RENDER_MAXSIZE")
        self.popups = PopupCloser(crawler.stats)
        self._contexts: dict[Any, BrowserContextWrapper] = {}  # every open context of the crawl, by context
        self._retiring: set[Any] = set()  # contexts on a retired browser, closing once their last page did
        self._closing_contexts: dict[Any, asyncio.Future] = {}  # (referenced till done)
        self._upstreams: dict[str, Upstream] = {}  # the crawl's proxy of each context named after one
        self._guards: dict[Upstream, GuardProxy] = {}  # a guarded crawl's guard proxy per crawl's proxy

    async def download_request(self, request: Request) -> Response:
        """Renders the request: dispatch.py hands over only those TRAWL_RENDER and their meta say render."""
        request.meta["playwright"] = True
        # The crawl's proxy: its credentials off the request's headers (scrapy-playwright would hand them to Chromium
        # for the origin), the page in a context of the crawl's through that proxy (egress.py).
        upstream = request_upstream(request)
        if upstream is not None:
            self._upstreams[context_through(request.meta, upstream)] = upstream
        started = time.monotonic()
        response = await self._download_request(request)
        # The site's latency is what the adaptive throttle judges the site by, not Chromium's rendering time (which
        # scrapy-playwright reports): a page that renders for a second must not read as a site slowing down.
        request.meta["download_latency"] = request.meta.pop(SERVER_LATENCY, request.meta.get("download_latency"))
        self.stats.inc_value("render/pages")
        self.stats.inc_value("render/seconds", round(time.monotonic() - started, 3))
        return response

    async def _launch(self) -> None:
        """Nothing to launch per crawl: the worker's browser starts with the first page rendered (browser.py)."""

    async def _create_browser_context(
        self, name: str, context_kwargs: dict | None, spider: Spider | None = None
    ) -> BrowserContextWrapper:
        context_kwargs = dict(context_kwargs or {})
        if context_kwargs.pop("user_data_dir", None):
            raise NotSupported("persistent browser contexts are not available: a crawl's contexts are its own")
        # A service worker's requests bypass page routing; Trawl's pages never need one.
        context_kwargs["service_workers"] = "block"
        context_kwargs["accept_downloads"] = False  # a download is never written, nor read whole (bounds.py)
        upstream = self._upstreams.get(name)
        if self.proxy is not None:
            context_kwargs["proxy"] = {"server": await self._guard_proxy(upstream).start()}
        elif upstream is not None:
            context_kwargs["proxy"] = upstream.for_playwright()
        context = await worker_browser.context_new(self.browser_config, **context_kwargs)
        await context.route("**", self._route_popup)  # pages the crawl did not open (window.open)
        await context.route_web_socket("**", self._refuse_web_socket)
        context.on("close", lambda _context: self._context_closed(name, context))
        context.on("page", self.popups.appeared)  # closes those the crawl did not open
        self.stats.inc_value("playwright/context_count")
        if self.timeout_ms:
            context.set_default_navigation_timeout(self.timeout_ms)
        semaphore = asyncio.Semaphore(value=self.config.max_pages_per_context)
        wrapper = BrowserContextWrapper(context=context, semaphore=semaphore, persistent=False)
        self.context_wrappers[name] = wrapper
        self._contexts[context] = wrapper
        return wrapper

    def _context_closed(self, name: str, context: Any) -> None:
        wrapper = self.context_wrappers.get(name)
        if wrapper is not None and wrapper.context is context:  # not a fresh context of the same name
            del self.context_wrappers[name]
        self._contexts.pop(context, None)
        self._retiring.discard(context)

    def _make_close_page_callback(self, context_name: str) -> Any:
        """Nothing: `_create_page` releases the page's place in the context it opened in (scrapy-playwright looks
        the context up by name when the page closes, which after a recycle names the fresh one)."""
        return lambda *_: None

    def _recycle(self, request: Request) -> None:
        """The request's context is on a retired browser: its next pages open in a fresh context (on a fresh browser)
        and the old context closes once its last page did."""
        name = request.meta.setdefault("playwright_context", "default")
        wrapper = self.context_wrappers.get(name)
        if wrapper is not None and worker_browser.retired(wrapper.context):
            del self.context_wrappers[name]
            self._retiring.add(wrapper.context)
            self._close_if_idle(wrapper.context)

    def _close_if_idle(self, context: Any) -> None:
        if context in self._retiring and not context.pages:
            self._retiring.discard(context)
            self._closing_contexts[context] = task = asyncio.ensure_future(context.close())
            task.add_done_callback(lambda _: self._closing_contexts.pop(context, None))

    async def _create_page(self, request: Request, spider: Spider) -> Page:
        slots = worker_browser.page_slots(self.browser_config)
        await slots.acquire()
        try:
            self._recycle(request)  # once it may open a page: the browser may have been retired meanwhile
            async with self.popups.opening() as own:
                page = await super()._create_page(request, spider)
                own(page)
        except BaseException:
            slots.release()
            raise
        context = page.context
        wrapper = self._contexts[context]
        released = False

        def release(*_: Any) -> None:  # on "close" and on "crash": once
            nonlocal released
            if not released:
                released = True
                slots.release()
                wrapper.semaphore.release()
                # A moment later: the context lists the page until its close event has run.
                asyncio.get_running_loop().call_soon(self._close_if_idle, context)

        page.on("close", release)
        page.on("crash", release)
        return page

    async def _close(self) -> None:
        """Every context of the crawl, recycled ones still closing included, then scrapy-playwright's own."""
        await asyncio.gather(*(context.close() for context in list(self._contexts)), return_exceptions=True)
        for guard in [self.proxy, *self._guards.values()]:
            if guard is not None:
                await guard.close()
        await super()._close()

    def _guard_proxy(self, upstream: Upstream | None) -> GuardProxy:
        """The guard proxy a guarded crawl's context goes through: the crawl's own, or one per crawl's proxy."""
        assert self.proxy is not None
        if upstream is None:
            return self.proxy
        if upstream not in self._guards:
            self._guards[upstream] = GuardProxy(resolver=self.rule.resolver, rule=self.rule, upstream=upstream)
        return self._guards[upstream]

    def _make_request_handler(self, **kwargs: Any) -> Any:
        """scrapy-playwright's route handler (Scrapy's headers, method, body), behind the sub-request rule."""
        inner = super()._make_request_handler(**kwargs)

        async def checked_handler(route: Route, request: PlaywrightRequest) -> None:
            checked = await route_checked(route, request, self.rule)
            if checked is not None:
                await inner(checked, request)

        return checked_handler

    async def _route_popup(self, route: Route, request: PlaywrightRequest) -> None:
        """Requests of pages the crawl did not open: a popup's (closed as it appears, bounds.py) loads nothing."""
        if request.is_navigation_request() and _opens_a_page(request):
            self.rule.refused(request.url, "popups are not loaded")
            await route.abort("blockedbyclient")
            return
        checked = await route_checked(route, request, self.rule)
        if checked is not None:
            await checked.continue_()

    async def _refuse_web_socket(self, socket: Any) -> None:
        self.rule.refused(socket.url, "web sockets are not opened by rendered pages")
        await socket.close()

    async def _get_response_and_download(self, request: Request, page: Page, spider: Spider) -> Any:
        response, download = await super()._get_response_and_download(request, page, spider)
        if response is not None:
            timing = response.request.timing  # milliseconds from the request's start (-1: not known)
            if timing.get("responseStart", -1) >= 0:
                request.meta[SERVER_LATENCY] = timing["responseStart"] / 1000
        return response, download

    async def _download_request_with_page(self, request: Request, page: Page, spider: Spider) -> Response:
        body_bounded(page, limit=self.body_max, url=request.url, stats=self.stats)
        try:
            return await super()._download_request_with_page(request, page, spider)
        except Exception:
            await self.screenshots.of_failure(page, request.url)  # scrapy-playwright closes the page after this
            raise

    async def _apply_page_methods(self, page: Page, request: Request, spider: Spider) -> None:
        await super()._apply_page_methods(page, request, spider)
        await self._wait(page, request)
        await self.screenshots.of_page(page, request.url)

    async def _wait(self, page: Page, request: Request) -> None:
        wait_for = request.meta.get("render_wait_for", self.wait_for)
        if not wait_for:
            return
        try:
            if wait_for == NETWORK_IDLE:
                await page.wait_for_load_state(NETWORK_IDLE, timeout=self.timeout_ms)
            else:
                await page.wait_for_selector(wait_for, timeout=self.timeout_ms)
        except PlaywrightError as exc:  # a bounded wait: the page as it is then is the response
            self.stats.inc_value("render/wait_timeouts")
            await self.screenshots.of_failure(page, request.url)
            logger.warning(
                "%s: waited %s ms for %r; the page as it is: %s",
                request.url,
                self.timeout_ms,
                wait_for,
                exc.message.splitlines()[0],
            )


def _opens_a_page(request: PlaywrightRequest) -> bool:
    """Is this navigation a page's main frame (a popup's first one comes before its frame exists)?"""
    try:
        return request.frame.parent_frame is None
    except PlaywrightError:  # "issued before the frame is created": a new page's
        return True
