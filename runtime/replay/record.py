"""Recording a crawl: every response as Scrapy's downloader handed it over (before decompression, redirects and
retries, so a replay goes through the same middlewares), as WARC `response` records (warcio), and the items the crawl
kept, bounded by TRAWL_RECORD_MAX_BYTES (compressed WARC) and TRAWL_RECORD_MAX_ITEMS. Past a bound the recording is
marked `truncated` and stops growing; the crawl goes on. The job's task drains it when the crawl ends and
crawls/replays/recordings.py stores it in the database (every host reaches it).

A packaged version's crawl records in its child process: the child sends its WARC to the worker in parts
(`recording_parts`, runtime/packaged/child.py), and the worker records the items it receives itself
(runtime/packaged/run.py) into a Recording of the same bounds, which keeps only what fits (`add_part`)."""

from __future__ import annotations

import base64
import binascii
import io
import json
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from itemadapter import ItemAdapter
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.settings import BaseSettings

RECORD_SETTING = "TRAWL_RECORD"
RECORDER = "runtime.replay.record.ResponseRecorder"
RECORDER_ORDER = 960  # closest to the downloader: sees each response before any middleware changed it
METHOD_HEADER = "WARC-Trawl-Method"
# A packaged crawl's WARC crosses to its worker in parts of this many bytes: a message of the child's channel is at
# most 8 MiB (runtime/packaged/channel.py), and base64 adds a third.
PART_BYTES = 2 * 1024 * 1024

_recordings: weakref.WeakKeyDictionary[Crawler, Recording] = weakref.WeakKeyDictionary()


@dataclass
class Recording:
    max_bytes: int
    max_items: int
    buffer: io.BytesIO = field(default_factory=io.BytesIO)
    responses: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False

    def __post_init__(self) -> None:
        # warcio (and the fsspec it imports, ~18 MiB) only in a process that records: every crawl process imports this
        from warcio.warcwriter import WARCWriter

        self.writer = WARCWriter(self.buffer, gzip=True)

    def add_response(self, request: Request, response: Response) -> None:
        if self.truncated:
            return
        reason = response.status  # WARC wants a status line; the reason phrase is not kept by Scrapy
        headers = [
            (key.decode("latin-1"), value.decode("latin-1"))
            for key, values in response.headers.items()
            for value in values
        ]
        from warcio.statusandheaders import StatusAndHeaders

        http_headers = StatusAndHeaders(f"{reason} -", headers, protocol="HTTP/1.1")
        record = self.writer.create_warc_record(
            response.url,
            "response",
            payload=io.BytesIO(response.body),
            http_headers=http_headers,
            warc_headers_dict={METHOD_HEADER: request.method},
        )
        mark = self.buffer.tell()
        self.writer.write_record(record)
        if self.buffer.tell() > self.max_bytes:
            self.buffer.seek(mark)
            self.buffer.truncate()
            self.truncated = True
            return
        self.responses += 1

    def add_item(self, item: Any) -> None:
        if len(self.items) >= self.max_items:
            self.truncated = True
            return
        self.items.append(json.loads(json.dumps(ItemAdapter(item).asdict(), default=str)))

    def add_part(self, fields: dict[str, Any]) -> None:
        """A part of the WARC a packaged crawl's child recorded (`recording_parts`), kept while the whole fits under
        max_bytes: the child runs uploaded code, so nothing it sends is trusted to be bounded or well formed."""
        part, responses = fields.get("part"), fields.get("responses")
        if self.truncated or not isinstance(part, str) or len(part) > PART_BYTES * 4 // 3 + 4:
            self.truncated = True
            return
        try:
            data = base64.b64decode(part, validate=True)
        except (binascii.Error, ValueError):
            self.truncated = True
            return
        if self.buffer.tell() + len(data) > self.max_bytes:
            self.truncated = True
            return
        self.buffer.write(data)
        self.responses += responses if type(responses) is int and 0 <= responses <= len(data) else 0
        self.truncated = self.truncated or fields.get("truncated") is True

    def warc(self) -> bytes:
        return self.buffer.getvalue()


def recording_parts(recording: Recording) -> Iterator[dict[str, Any]]:
    """The child's side of Recording.add_part: its WARC in parts; the last one counts the responses."""
    warc = recording.warc()
    starts = range(0, len(warc), PART_BYTES)
    for start in starts:
        last = start == starts[-1]
        yield {
            "part": base64.b64encode(warc[start : start + PART_BYTES]).decode("ascii"),
            "responses": recording.responses if last else 0,
            "truncated": recording.truncated if last else False,
        }


class ResponseRecorder:
    """A downloader middleware (and item_scraped receiver) that records the crawl when TRAWL_RECORD is on."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ResponseRecorder:
        recording = recording_for(crawler.settings)
        if recording is None:
            raise NotConfigured
        _recordings[crawler] = recording
        recorder = cls(recording)
        crawler.signals.connect(recorder.item_scraped, signal=signals.item_scraped)
        return recorder

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        self.recording.add_response(request, response)
        return response

    def item_scraped(self, item: Any, response: Any, spider: Any) -> None:
        self.recording.add_item(item)


def recording_for(settings: Mapping[str, Any]) -> Recording | None:
    """An empty recording of the crawl's bounds, None when the crawl does not record."""
    settings = settings if isinstance(settings, BaseSettings) else BaseSettings(settings)
    if not settings.getbool(RECORD_SETTING):
        return None
    return Recording(
        max_bytes=settings.getint("TRAWL_RECORD_MAX_BYTES"), max_items=settings.getint("TRAWL_RECORD_MAX_ITEMS")
    )


def recording_drain(crawler: Any) -> Recording | None:
    """The crawl's recording (None when it recorded nothing), handed over once."""
    return _recordings.pop(crawler, None) if crawler is not None else None
