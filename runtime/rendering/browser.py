"""The worker process's browser: one Chromium per process, launched on the first rendered request and shared by every
crawl the process runs; each crawl renders in browser contexts of its own (runtime/rendering/handler.py), so
cookies and storage never pass between jobs or requesters.

The browser closes with the last context open on it: a process that renders nothing (between jobs, after a cancel,
a timeout or a stall stopped its crawl) runs no Chromium, and each stretch of rendering starts with a fresh one, so
Chromium's memory never outlives the crawls that used it. A browser that opened TRAWL_RENDER_RECYCLE_PAGES pages, or
whose processes hold more than TRAWL_RENDER_RECYCLE_MEMORY_MB, is retired: new contexts go to a fresh one, the crawls
move their pages there (handler.py), and the old one closes with its last context — a long crawl's Chromium does not
grow for ever either.

Chromium is launched through chromium_launch.py, which ties its life to Playwright's driver, whose stdin is the
worker's pipe: a SIGKILLed worker takes its browser with it. A worker stopping normally closes it (`browser_close`,
from worker_process_shutdown). The driver and Chromium get an allow-listed environment, Chromium its sandbox unless
the worker is root, and WebRTC no unproxied UDP (environment.py).

Everything here runs in the worker's reactor loop (the asyncio loop crochet runs), the one Playwright binds to.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from playwright.async_api import Browser, BrowserContext, Playwright, async_playwright

from runtime.rendering.environment import chromium_args, chromium_env, driver_scrubbed

MEMORY_CHECK_PAGES = 10  # pages between two looks at the browser's memory

logger = logging.getLogger("trawl.render")

LAUNCHER = Path(__file__).with_name("chromium_launch.py")


@dataclass(frozen=True)
class BrowserConfig:
    """How the process's browser is launched and bounded (read from a crawl's settings; the first crawl to render
    launches it, later crawls share it)."""

    binary: str
    max_pages: int
    recycle_pages: int
    recycle_memory_mb: int

    @classmethod
    def from_settings(cls, settings: Any) -> BrowserConfig:
        return cls(
            binary=settings.get("TRAWL_RENDER_CHROMIUM"),
            max_pages=settings.getint("TRAWL_RENDER_MAX_PAGES"),
            recycle_pages=settings.getint("TRAWL_RENDER_RECYCLE_PAGES"),
            recycle_memory_mb=settings.getint("TRAWL_RENDER_RECYCLE_MEMORY_MB"),
        )


@dataclass
class _Launched:
    browser: Browser
    contexts: set[BrowserContext] = field(default_factory=set)
    opening: int = 0  # contexts being created: the browser is in use already
    pages: int = 0
    pid: int | None = None  # its browser process (None: not found in the process table)
    retired: bool = False  # no new context goes to it
    closing: bool = False


class WorkerBrowser:
    """The process's Playwright, its current browser and the pages open at once across every crawl."""

    def __init__(self) -> None:
        self._playwright: Playwright | None = None
        self._current: _Launched | None = None
        self._lock: asyncio.Lock | None = None
        self._closing: set[asyncio.Future] = set()  # browsers being closed (a reference keeps the task alive)
        self._page_slots: asyncio.Semaphore | None = None

    def page_slots(self, config: BrowserConfig) -> asyncio.Semaphore:
        """Taken by each page while it is open, whichever crawl opened it: Chromium's memory is the process's."""
        if self._page_slots is None:
            self._page_slots = asyncio.Semaphore(max(1, config.max_pages))
        return self._page_slots

    async def context_new(self, config: BrowserConfig, **kwargs: Any) -> BrowserContext:
        """A new, empty browser context on the current browser (launched first if there is none)."""
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            launched = self._current
            if launched is None or launched.retired or launched.closing or not launched.browser.is_connected():
                before = chromium_browsers()
                browser = await self._launch(config)
                started = chromium_browsers() - before
                launched = self._current = _Launched(browser=browser, pid=min(started) if started else None)
            launched.opening += 1
        try:
            context = await launched.browser.new_context(**kwargs)
            launched.contexts.add(context)
        finally:
            launched.opening -= 1
        context.on("close", lambda _context: self._context_closed(launched, context))
        context.on("page", lambda _page: self._page_opened(launched, config))
        return context

    def retired(self, context: BrowserContext) -> bool:
        """Is the context's browser retired (its crawl should open its next pages in a fresh context)?"""
        current = self._current
        return current is None or context not in current.contexts

    def _page_opened(self, launched: _Launched, config: BrowserConfig) -> None:
        launched.pages += 1
        if launched.retired:
            return
        if config.recycle_pages and launched.pages >= config.recycle_pages:
            why = f"opened {launched.pages} pages"
        elif config.recycle_memory_mb and launched.pages % MEMORY_CHECK_PAGES == 0:
            # Every few pages, not each: reading the process table costs a system call per Chromium process.
            resident = chromium_resident_mib(launched.pid)
            if resident <= config.recycle_memory_mb:
                return
            why = f"uses {resident:.0f} MiB (TRAWL_RENDER_RECYCLE_MEMORY_MB {config.recycle_memory_mb})"
        else:
            return
        logger.info("Chromium %s: the next contexts go to a fresh one", why)
        launched.retired = True
        if self._current is launched:
            self._current = None

    async def _launch(self, config: BrowserConfig) -> Browser:
        if self._playwright is None:
            driver_scrubbed()  # the driver starts with an allow-listed environment, not the worker's
            self._playwright = await async_playwright().start()
        logger.info("launching Chromium (%s) for this worker process", config.binary)
        return await self._playwright.chromium.launch(
            executable_path=str(LAUNCHER),
            headless=True,
            args=chromium_args(),
            env=chromium_env(config.binary),
            handle_sigint=False,
            handle_sigterm=False,
            handle_sighup=False,
        )

    def _context_closed(self, launched: _Launched, context: BrowserContext) -> None:
        launched.contexts.discard(context)
        if not launched.contexts and not launched.opening and not launched.closing:
            launched.closing = True
            if self._current is launched:
                self._current = None
            self._closing.add(task := asyncio.ensure_future(_close_quietly(launched.browser)))
            why = "retired, its last context closed" if launched.retired else "no crawl of this process renders now"
            logger.info("Chromium closes: %s", why)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        launched, self._current = self._current, None
        if launched is not None:
            await _close_quietly(launched.browser)
        playwright, self._playwright = self._playwright, None
        if playwright is not None:
            await playwright.stop()


def chromium_browsers() -> set[int]:
    """This process's Chromium browser processes (its helpers — zygotes, renderers — run with a --type=...)."""
    found = set()
    for process in psutil.Process().children(recursive=True):
        try:
            command = process.cmdline()
        except psutil.Error:  # exited while the table was read
            continue
        if command and "chrom" in Path(command[0]).name and not any(a.startswith("--type=") for a in command):
            found.add(process.pid)
    return found


def chromium_resident_mib(pid: int | None) -> float:
    """Resident memory of one browser and its helpers, in MiB (pages shared between them counted in each: a ceiling's
    measure, not an accounting)."""
    if pid is None:
        return 0.0
    try:
        browser = psutil.Process(pid)
        tree = [browser, *browser.children(recursive=True)]
    except psutil.Error:
        return 0.0
    resident = 0
    for process in tree:
        try:
            resident += process.memory_info().rss
        except psutil.Error:
            continue
    return resident / 2**20


async def _close_quietly(browser: Browser) -> None:
    try:
        await browser.close()
    except Exception:  # already gone (crashed, or its driver exited): nothing left to close
        logger.debug("closing Chromium failed", exc_info=True)


worker_browser = WorkerBrowser()


def browser_close() -> None:
    """Close the process's browser, if one runs (worker_process_shutdown): waits for it in the reactor's loop."""
    if worker_browser._current is None and worker_browser._playwright is None:
        return
    import crochet

    @crochet.wait_for(timeout=15)
    def _close() -> Any:
        from twisted.internet.defer import Deferred

        return Deferred.fromFuture(asyncio.ensure_future(worker_browser.close()))

    try:
        _close()
    except Exception:
        logger.warning("Chromium did not close in time; it exits with this process", exc_info=True)
