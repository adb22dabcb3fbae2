"""Serving a crawl from a recording: `RecordedResponses`, first of the downloader middlewares, answers each request
with the response recorded for its method and URL (the same one again when asked again), so no request reaches the
downloader; one that was not recorded is refused (stat `replay/not_recorded`), never fetched: the replay's child
process also refuses every socket (runtime/replay/child.py)."""

from __future__ import annotations

import io
from typing import Any

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Headers, Response
from scrapy.responsetypes import responsetypes

from runtime.replay.record import METHOD_HEADER

WARC_SETTING = "TRAWL_REPLAY_WARC"  # the recording's path, in the replay's child only
SERVER = "runtime.replay.serve.RecordedResponses"
SERVER_ORDER = 1  # before every other middleware: a replayed request takes no token, opens no proxy


def responses_of(warc: bytes) -> dict[tuple[str, str], tuple[int, list[tuple[str, str]], bytes]]:
    """(method, url) → (status, headers, raw body) of a recording; a URL recorded twice keeps its first answer."""
    from warcio.archiveiterator import ArchiveIterator  # only where a replay runs (runtime.replay.record says why)

    found: dict[tuple[str, str], tuple[int, list[tuple[str, str]], bytes]] = {}
    for record in ArchiveIterator(io.BytesIO(warc)):
        if record.rec_type != "response":
            continue
        key = (record.rec_headers.get_header(METHOD_HEADER) or "GET", record.rec_headers.get_header("WARC-Target-URI"))
        status = int(record.http_headers.get_statuscode() or 200)
        found.setdefault(key, (status, list(record.http_headers.headers), record.raw_stream.read()))
    return found


class RecordedResponses:
    def __init__(self, recorded: dict, stats: Any) -> None:
        self.recorded = recorded
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> RecordedResponses:
        path = crawler.settings.get(WARC_SETTING)
        if not path:
            raise NotConfigured
        with open(path, "rb") as warc:
            return cls(responses_of(warc.read()), crawler.stats)

    def process_request(self, request: Request, spider: Spider | None = None) -> Response | None:
        found = self.recorded.get((request.method, request.url))
        if found is None:
            self.stats.inc_value("replay/not_recorded")
            raise IgnoreRequest(f"not in the recording: {request.method} {request.url}")
        status, headers, body = found
        self.stats.inc_value("replay/served")
        kept = Headers()
        for name, value in headers:
            kept.appendlist(name, value)
        cls = responsetypes.from_args(headers=kept, url=request.url, body=body)
        return cls(url=request.url, status=status, headers=kept, body=body, request=request)
