"""Ingestion: the items a running crawl hands over, stored from the task thread.

Each tick drains the crawl's item queue chunk by chunk: links reported with `discovered(url)` are kept apart (a hub
source's discovery, stored when the job ends), the rest are checked against the version's item schema, counted once
per crawl and upserted. With a frontier, what was stored leaves the shard's write-ahead log in Redis, and items a dead
shard (or an earlier attempt) wrote ahead but never stored are adopted.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from django.conf import settings

from access.tenancy import job_tenant_id
from crawls.models import CrawlJob
from crawls.services.shards import Shard
from items.ingestion import Ingestion
from items.services import item_fingerprint, items_upsert
from runtime.bridge.outcome import job_stats
from runtime.bridge.runner import CrawlSession, crawls_running, live_stats
from runtime.frontier.bounded import RecentSet
from runtime.spiders.discovery import is_discovered

# How often a running crawl stores its items: a transaction (five statements: lock, upsert, sightings, prices,
# categories) per handful of items was most of what a throttled crawl cost. A crawl alone in its process stores every
# STORE_SECONDS; one of several (a crawl host's) every STORE_SECONDS_SHARED, where those transactions add up (50 crawls
# at 1 request a second: 15 s instead of 5 took 7 % off their process's CPU, bench/README.md "Density"). A chunk's
# worth, or a crawl waiting for them, is stored at once; until then they wait in the process (and, with a frontier, in
# the shard's write-ahead log in Redis, so a process that dies loses none).
STORE_SECONDS = 2.0
STORE_SECONDS_SHARED = 15.0
SCRAPY_STATS_SECONDS = 0.5  # how often a frontier crawl reads Scrapy's stats to record with its stored items
# Item fingerprints a crawl remembers having counted. One forgotten and met again is upserted again (unchanged) and
# counted twice; never the other way round: an item is not dropped as seen when it was not.
ITEMS_SEEN_MAX = 100_000


class ItemIngest:
    """The items of one crawl (one shard of one attempt): what was stored, counted, and discovered."""

    def __init__(self, job: CrawlJob, *, shard: Shard | None = None) -> None:
        self.job = job
        self.shard = shard  # the job's frontier in Redis, when this crawl uses it
        # The version's item schema: invalid items never reach the upsert.
        self.ingestion = Ingestion.for_job(
            scraper_settings=job.scraper.settings,
            version_settings=job.version.settings if job.version_id else None,
            url=job.url,
        )
        # Whose items these are: looked up once, not for every chunk.
        self.tenant_id = job_tenant_id(requester_id=job.requester_id)
        self.counts: Counter = Counter()
        self.seen = RecentSet(ITEMS_SEEN_MAX)
        self.discovered: dict[str, dict[str, Any]] = {}  # links reported with `discovered(url)`, by URL
        self.pending: list[dict[str, Any]] = []  # drained but not written yet (the database refused them)
        self.pending_drained = 0  # how many drained items `pending` stands for (the frontier's write-ahead count)
        self.last_scrapy_read = 0.0
        self.last_store = time.monotonic()
        self.scrapy_progress: dict[str, Any] = {}

    def store_due(self, session: CrawlSession) -> bool:
        """Whether this tick stores the queued items: every STORE_SECONDS (STORE_SECONDS_SHARED beside other crawls),
        or now for a chunk or a waiting crawl."""
        every = STORE_SECONDS if crawls_running() <= 1 else STORE_SECONDS_SHARED
        return (
            session.store_now
            or session.items.qsize() >= settings.TRAWL_ITEM_CHUNK
            or time.monotonic() - self.last_store >= every
        )

    def flush(self, session: CrawlSession, *, budget: float | None = None) -> None:
        """Upsert queued items chunk by chunk until none are left, or (during a crawl) until `budget` seconds passed.

        Draining everything each tick keeps a fast crawl from leaving a backlog to write after it ends. Raises when
        the database refuses a chunk: it is kept, and written by the next call.
        """
        self.last_store = time.monotonic()
        deadline = None if budget is None else self.last_store + budget
        while True:
            if not self.pending_drained:
                batch = session.drain(settings.TRAWL_ITEM_CHUNK)
                self.pending, self.pending_drained = self._fresh(batch), len(batch)
            drained = self.pending_drained
            if self.pending:
                self.counts.update(self._upsert(self.pending))
            self.pending, self.pending_drained = [], 0
            if drained and self.shard is not None:
                # Stored: out of the shard's write-ahead log in Redis, with this shard's stats at that moment.
                self.shard.frontier.stored(drained, progress=self._progress_now(session))
            if not drained or (deadline is not None and time.monotonic() >= deadline):
                break
        if self.shard is not None:
            self._adopt_orphans()

    def item_counts(self) -> dict[str, int]:
        return {f"items_{change}": self.counts.get(change, 0) for change in ("new", "changed", "unchanged")} | {
            "items": sum(self.counts.values()),
            **self.ingestion.stats(),  # items_invalid (not in `items`) and invalid_sample
        }

    def _fresh(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The same item seen twice in one crawl counts once.
        valid = self.ingestion.clean([data for data in batch if not self._discovery(data)])
        return [data for data in valid if self._first_sighting(data)]

    def _store(self, batch: list[dict[str, Any]]) -> None:
        if fresh := self._fresh(batch):
            self.counts.update(self._upsert(fresh))

    def _upsert(self, items: list[dict[str, Any]]) -> Counter:
        job = self.job
        return items_upsert(
            job_id=job.pk, scraper_id=job.scraper_id, tenant_id=self.tenant_id, items=items, source_id=job.source_id
        )

    def _adopt_orphans(self) -> None:
        """Store the items a dead shard (or an earlier attempt) scraped and wrote ahead but never stored."""
        while orphans := self.shard.frontier.adopt(settings.TRAWL_ITEM_CHUNK):
            self._store([json.loads(raw) for raw in orphans])
            self.shard.frontier.adopted()

    def _progress_now(self, session: CrawlSession) -> dict[str, Any]:
        """This shard's stats for the frontier: item counts exact, Scrapy's numbers read every SCRAPY_STATS_SECONDS
        (reading them means a trip into the reactor thread)."""
        if time.monotonic() - self.last_scrapy_read >= SCRAPY_STATS_SECONDS:
            self.last_scrapy_read = time.monotonic()
            self.scrapy_progress = job_stats(live_stats(session))
        return {**self.scrapy_progress, **self.item_counts()}

    def _discovery(self, data: dict[str, Any]) -> bool:
        if is_discovered(data):
            self.discovered.setdefault(str(data.get("url")), data)
        return is_discovered(data)

    def _first_sighting(self, data: dict[str, Any]) -> bool:
        fingerprint = item_fingerprint(data)
        if fingerprint in self.seen:
            return False
        self.seen.add(fingerprint)
        return True
