"""What a rendered page may make the worker hold: its HTML up to TRAWL_RENDER_MAXSIZE bytes, no download, no popup.

- The page's HTML is what its scripts built, not what a server sent: DOWNLOAD_MAXSIZE never saw it. scrapy-playwright
  reads it whole (`page.content()`, one message through the driver's pipe, then a str and its bytes in the worker).
  The rendered page's `content` is replaced by `bounded_content`: one evaluation in the page measures and returns the
  HTML together (a script cannot grow it between the two), and hands over nothing above the limit — the request fails
  as Scrapy fails a body above DOWNLOAD_MAXSIZE (`DownloadCancelledError`), counted in `render/body_too_large`.
- Downloads: contexts are created with `accept_downloads=False` (handler.py), so a navigation to a file, or a link
  the page clicks, never writes a file the worker then reads whole.
- Popups (`window.open`, `target=_blank`, with or without `noopener`): every page of a crawl's context that the crawl
  did not open is closed as soon as it appears (`render/popups_closed`); its first navigation is refused in the
  context's route (handler.py), so it loads nothing meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from playwright.async_api import Page
from scrapy.exceptions import DownloadCancelledError

logger = logging.getLogger("trawl.render")

# The page's HTML as Playwright's page.content() builds it, handed over only within `limit` UTF-16 units (a byte of
# UTF-8 is at least one unit, so nothing within the byte limit is refused; the exact byte count is checked after).
CONTENT_WITHIN = """(limit) => {
  let html = "";
  if (document.doctype) html = new XMLSerializer().serializeToString(document.doctype);
  if (document.documentElement) html += document.documentElement.outerHTML;
  if (typeof html !== "string") html = "";
  return html.length > limit ? {size: html.length, html: null} : {size: html.length, html: html};
}"""


def body_bounded(page: Page, *, limit: int, url: str, stats: Any) -> None:
    """Make scrapy-playwright's read of this page's HTML a bounded one (limit 0: unbounded)."""
    if limit <= 0:
        return

    async def bounded_content() -> str:
        found = await page.evaluate(CONTENT_WITHIN, limit)
        html = found.get("html") if isinstance(found, dict) else None
        size = len(html.encode("utf-8", "surrogatepass")) if isinstance(html, str) else int(found.get("size") or 0)
        if not isinstance(html, str) or size > limit:
            stats.inc_value("render/body_too_large")
            message = f"the rendered page {url} is {size} bytes or more, above TRAWL_RENDER_MAXSIZE ({limit})"
            logger.warning("%s: not read", message)
            raise DownloadCancelledError(message)
        return html

    page.content = bounded_content  # this page only: scrapy-playwright reads it through page.content()


class PopupCloser:
    """Closes every page of a crawl's contexts that the crawl did not open itself (popups, with or without an
    opener) as it appears. A context announces a new page before the `new_page()` that made it returns, so a page
    is judged once the crawl's page creations under way when it appeared are done."""

    def __init__(self, stats: Any) -> None:
        self.stats = stats
        self._own: weakref.WeakSet[Page] = weakref.WeakSet()
        self._creating: set[asyncio.Future] = set()
        self._tasks: set[asyncio.Future] = set()

    @contextlib.asynccontextmanager
    async def opening(self) -> AsyncIterator[Callable[[Page], None]]:
        """Around the crawl's own page creation; call what it yields with the page created."""
        done = asyncio.get_running_loop().create_future()
        self._creating.add(done)
        try:
            yield self._own.add
        finally:
            self._creating.discard(done)
            done.set_result(None)

    def appeared(self, page: Page) -> None:
        """A context's "page" event."""
        self._spawn(self._judge(page, list(self._creating)))

    async def _judge(self, page: Page, creating: list[asyncio.Future]) -> None:
        await asyncio.gather(*creating)
        if page not in self._own:
            self.stats.inc_value("render/popups_closed")
            await _close_quietly(page)

    def _spawn(self, work: Any) -> None:
        self._tasks.add(task := asyncio.ensure_future(work))
        task.add_done_callback(self._tasks.discard)


async def _close_quietly(page: Page) -> None:
    try:
        await page.close()
    except Exception:  # closed already (its context or browser went first)
        logger.debug("closing a popup failed", exc_info=True)
