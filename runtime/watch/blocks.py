"""Block detection on every response: statuses that mean "go away" (403, 429) and captcha or challenge pages (a 200
whose body is a captcha is a block too). Counted as `blocks/checked` (all), `blocks/blocked` and `blocks/captcha`;
the job's outcome (runtime.bridge.outcome) is `blocked` once blocks are a large share of what the site answered, so
one 2xx among a run of 403s no longer counts as a success, and the source backs off."""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response

BLOCK_STATUSES = frozenset({403, 429})
HEAD_BYTES = 65536  # captcha markers sit in the head or the first screen of a page


def captcha_marker(body: bytes, markers: list[bytes]) -> bytes | None:
    """The first captcha/challenge marker found in the start of the body, if any."""
    head = body[:HEAD_BYTES].lower()
    return next((marker for marker in markers if marker in head), None)


class BlockDetector:
    """Counts blocked responses; never changes or drops one (retries and proxy rotation decide what to do)."""

    def __init__(self, *, markers: list[str], stats: Any) -> None:
        self.markers = [marker.lower().encode() for marker in markers if marker]
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BlockDetector:
        markers = crawler.settings.getlist("TRAWL_BLOCK_MARKERS")
        return cls(markers=markers, stats=crawler.stats)

    def process_response(self, request: Request, response: Response) -> Response:
        if request.meta.get("dont_detect_blocks") or "robots.txt" in request.url.rsplit("/", 1)[-1]:
            return response
        self.stats.inc_value("blocks/checked")  # every response looked at; `blocked` are blocks
        captcha = captcha_marker(response.body, self.markers) if response.body else None
        if captcha:
            self.stats.inc_value("blocks/captcha")
        if captcha or response.status in BLOCK_STATUSES:
            self.stats.inc_value("blocks/blocked")
        return response
