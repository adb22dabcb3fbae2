"""Screenshots of rendered pages, taken in the reactor and handed to the job's task thread: the page as Chromium
showed it when it failed (its navigation or its wait timed out, say), and the first TRAWL_RENDER_SCREENSHOTS pages of
a crawl that asked. At most TRAWL_RENDER_SCREENSHOTS_MAX per crawl, JPEG of the viewport: a job's screenshots stay a
few hundred KiB. No Django here: crawls/services/screenshots.py stores them with the job. No Playwright at import
either: every job's task drains the screenshots (crawls/services/execution.py), most never rendered a page."""

from __future__ import annotations

import base64
import binascii
import logging
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy.crawler import Crawler

if TYPE_CHECKING:
    from playwright.async_api import Page

logger = logging.getLogger("trawl.render")

JPEG_QUALITY = 70
SCREENSHOT_TIMEOUT_MS = 5000  # a page too broken to paint in that time is not worth the wait
# A viewport JPEG at JPEG_QUALITY is well under 1 MiB; a packaged crawl's child claiming more is not sending one.
SCREENSHOT_MAX_BYTES = 2 * 1024 * 1024
REASONS = ("failure", "asked")

_taken: weakref.WeakKeyDictionary[Crawler, deque[Screenshot]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Screenshot:
    url: str
    reason: str  # "failure" or "asked" (crawls.models.JobScreenshot.Reason)
    image: bytes
    taken_at: float


class Screenshots:
    """One crawl's camera: what it may still take, and where the pictures go."""

    def __init__(self, crawler: Crawler, *, asked: int, most: int) -> None:
        self.asked_left = max(0, asked)
        self.left = max(0, most)
        self.stats = crawler.stats
        self.taken = _taken.setdefault(crawler, deque())

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Screenshots:
        settings = crawler.settings
        return cls(
            crawler,
            asked=settings.getint("TRAWL_RENDER_SCREENSHOTS"),
            most=settings.getint("TRAWL_RENDER_SCREENSHOTS_MAX"),
        )

    async def of_page(self, page: Page, url: str) -> None:
        if self.asked_left and self.left:
            self.asked_left -= 1
            await self._take(page, url, "asked")

    async def of_failure(self, page: Page, url: str) -> None:
        if self.left and not page.is_closed():
            await self._take(page, url, "failure")

    async def _take(self, page: Page, url: str, reason: str) -> None:
        from playwright.async_api import Error as PlaywrightError  # loaded already: a page was rendered

        self.left -= 1
        try:
            image = await page.screenshot(type="jpeg", quality=JPEG_QUALITY, timeout=SCREENSHOT_TIMEOUT_MS)
        except PlaywrightError as exc:
            logger.info("no screenshot of %s: %s", url, exc.message.splitlines()[0])
            return
        self.taken.append(Screenshot(url=url, reason=reason, image=image, taken_at=time.time()))
        self.stats.inc_value("render/screenshots")


def screenshots_drain(crawler: Any) -> list[Screenshot]:
    """What the crawl took since the last drain (called from the job's task thread: deque pops are thread-safe)."""
    taken = _taken.get(crawler) if crawler is not None else None
    drained = []
    while taken:
        drained.append(taken.popleft())
    return drained


def screenshot_fields(shot: Screenshot) -> dict[str, Any]:
    """A screenshot as a packaged crawl's child sends it to its worker (runtime/packaged/child.py)."""
    image = base64.b64encode(shot.image).decode("ascii")
    return {"url": shot.url, "reason": shot.reason, "taken_at": shot.taken_at, "image": image}


def screenshot_received(fields: dict[str, Any]) -> Screenshot | None:
    """The worker's side of screenshot_fields: the child runs uploaded code, so a screenshot is kept only if it is
    one — a JPEG of bounded size, a known reason, a URL and a time of plain types. None otherwise."""
    image, url, reason, taken_at = (fields.get(key) for key in ("image", "url", "reason", "taken_at"))
    if not isinstance(image, str) or len(image) > SCREENSHOT_MAX_BYTES * 4 // 3 + 4:
        return None
    try:
        data = base64.b64decode(image, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not data.startswith(b"\xff\xd8\xff") or not isinstance(url, str) or reason not in REASONS:
        return None
    taken_at = taken_at if type(taken_at) in (int, float) and 0 < taken_at <= time.time() + 60 else time.time()
    return Screenshot(url=url, reason=reason, image=data, taken_at=taken_at)  # its URL cut where it is stored
