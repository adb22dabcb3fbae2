"""The seen-set of a crawl on the job's frontier (runtime.frontier), and which frontier a crawl's settings name."""

from __future__ import annotations

from typing import Any

from scrapy import Request, Spider
from scrapy.dupefilters import BaseDupeFilter

from runtime.frontier import Frontier, compact_fingerprint


def frontier_for(settings: Any) -> Frontier:
    """The frontier a crawl's settings name (TRAWL_FRONTIER = {"job", "attempt", "shard", "epoch"}); without an
    epoch (a crawl started outside a job's task, in tests) the scheduler opens the frontier itself."""
    spec = settings.getdict("TRAWL_FRONTIER")
    return Frontier(
        spec["job"],
        ttl_seconds=settings.getfloat("TRAWL_FRONTIER_TTL_SECONDS"),
        lease_seconds=settings.getfloat("TRAWL_FRONTIER_LEASE_SECONDS"),
        attempt=int(spec.get("attempt", 1)),
        shard=int(spec.get("shard", 0)),
        epoch=str(spec.get("epoch") or ""),
    )


class FrontierDupeFilter(BaseDupeFilter):
    """The seen-set in Redis: 12-byte fingerprints, shared by every shard and attempt of the job."""

    def __init__(self, frontier: Frontier, fingerprinter: Any, stats: Any = None) -> None:
        self.frontier = frontier
        self.fingerprinter = fingerprinter
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> FrontierDupeFilter:
        return cls(frontier_for(crawler.settings), crawler.request_fingerprinter, crawler.stats)

    def request_fingerprint(self, request: Request) -> bytes:
        return compact_fingerprint(self.fingerprinter.fingerprint(request))

    def request_seen(self, request: Request) -> bool:
        return self.frontier.seen(self.request_fingerprint(request))

    def log(self, request: Request, spider: Spider) -> None:
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")
