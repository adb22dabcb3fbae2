"""Keeping the response that made a spider's callback raise: the page a selector broke on is the first thing a spider
author asks for, and it is gone once the crawl ends.

`ErrorPages`, an extension on Scrapy's `spider_error` signal, keeps the first TRAWL_ERROR_PAGE_MAX_BYTES of the body of
at most TRAWL_ERROR_PAGES_MAX such responses per crawl, with their URL, status, content type and the exception, and
logs a record that links the kept page (`GET /api/jobs/{job}/error-pages/{number}/`) right after Scrapy's "Spider error
processing" record. No Django here: crawls/logs/error_pages.py stores them with the job (the database: every
host reaches it) once the crawl ends. A packaged version's child process sends what it kept to its worker
(`error_page_fields`), which keeps only what checks out (`error_page_received`).
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

logger = logging.getLogger("trawl.error_pages")

_kept: weakref.WeakKeyDictionary[Crawler, deque[ErrorPage]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ErrorPage:
    number: int  # the crawl's attempt × 1000 + its order in the crawl: unique per job, named in the log's link
    url: str
    status: int
    content_type: str
    body: bytes
    size: int  # the whole body's bytes (body holds the first TRAWL_ERROR_PAGE_MAX_BYTES)
    error: str
    kept_at: float


NUMBER_LIMIT = 2**31  # what the database's column holds (crawls.models.JobErrorPage)
PAGE_FIELDS = ("number", "url", "status", "content_type", "size", "error", "kept_at")


def error_page_number(*, attempt: int, order: int) -> int:
    return attempt * 1000 + order


class ErrorPages:
    def __init__(self, crawler: Crawler, *, most: int, max_bytes: int, job_id: str, attempt: int) -> None:
        self.left = most
        self.max_bytes = max_bytes
        self.job_id = job_id
        self.attempt = attempt
        self.order = 0
        self.stats = crawler.stats
        self.kept = _kept.setdefault(crawler, deque())

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ErrorPages:
        settings = crawler.settings
        most = settings.getint("TRAWL_ERROR_PAGES_MAX")
        if most <= 0:
            raise NotConfigured
        params = settings.getdict("TRAWL_FEED_PARAMS")
        extension = cls(
            crawler,
            most=most,
            max_bytes=settings.getint("TRAWL_ERROR_PAGE_MAX_BYTES"),
            job_id=str(params.get("job_id") or ""),
            attempt=int(params.get("attempt") or 1),
        )
        crawler.signals.connect(extension.spider_error, signal=signals.spider_error)
        return extension

    def spider_error(self, failure: Any, response: Any, spider: Any) -> None:
        if self.left <= 0 or response is None:
            return
        self.left -= 1
        self.order += 1
        body = bytes(response.body or b"")
        page = ErrorPage(
            number=error_page_number(attempt=self.attempt, order=self.order),
            url=response.url,
            status=int(response.status),
            content_type=(response.headers.get(b"Content-Type") or b"").decode("latin-1")[:200],
            body=body[: self.max_bytes],
            size=len(body),
            error=f"{failure.type.__name__}: {failure.value}"[:1000],
            kept_at=time.time(),
        )
        self.kept.append(page)
        self.stats.inc_value("error_pages/kept")
        logger.warning(
            "kept the response that made the spider raise: %s (HTTP %s, %d of %d bytes): /api/jobs/%s/error-pages/%s/",
            page.url,
            page.status,
            len(page.body),
            page.size,
            self.job_id,
            page.number,
        )


def error_pages_drain(crawler: Any) -> list[ErrorPage]:
    """What the crawl kept since the last drain (called from the job's task thread: deque pops are thread-safe)."""
    kept = _kept.get(crawler) if crawler is not None else None
    drained = []
    while kept:
        drained.append(kept.popleft())
    return drained


def error_page_fields(page: ErrorPage) -> dict[str, Any]:
    """A kept page as a packaged crawl's child sends it to its worker (runtime/packaged/child.py)."""
    return {**{name: getattr(page, name) for name in PAGE_FIELDS}, "body": base64.b64encode(page.body).decode("ascii")}


def error_page_received(fields: dict[str, Any], *, max_bytes: int) -> ErrorPage | None:
    """The worker's side of error_page_fields: the child runs uploaded code, so a page is kept only if its fields
    are of plain types and its body (cut to `max_bytes`) is base64. None otherwise."""
    body, number, status, size = (fields.get(key) for key in ("body", "number", "status", "size"))
    texts = [fields.get(key) for key in ("url", "content_type", "error")]
    if not isinstance(body, str) or len(body) > max_bytes * 4 // 3 + 4 or not all(isinstance(t, str) for t in texts):
        return None
    if not all(type(value) is int for value in (number, status, size)):
        return None
    if not (0 < number < NUMBER_LIMIT and 100 <= status <= 999 and 0 <= size < NUMBER_LIMIT**2):
        return None
    try:
        data = base64.b64decode(body, validate=True)[:max_bytes]
    except (binascii.Error, ValueError):
        return None
    kept_at = fields.get("kept_at")
    kept_at = kept_at if type(kept_at) in (int, float) and 0 < kept_at <= time.time() + 60 else time.time()
    url, content_type, error = texts
    return ErrorPage(
        number=number,
        url=url[:2000],
        status=status,
        content_type=content_type[:200],
        body=data,
        size=max(size, len(data)),
        error=error[:1000],
        kept_at=kept_at,
    )
