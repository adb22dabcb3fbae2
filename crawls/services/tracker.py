"""What a running crawl's task thread does every tick (JobTracker): upsert the items that arrived, heartbeat, notice
cancel, shutdown or lost ownership, store what the job's frontier wrote ahead."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import Counter
from typing import Any

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from access.tenancy import job_tenant_id
from crawls.cancel import cancel_requested
from crawls.frontier import FrontierLost
from crawls.models import CrawlJob, JobStatus
from crawls.progress import PROGRESS_SECONDS, progress_store
from crawls.scraping.discovery import is_discovered
from crawls.scraping.outcome import job_stats
from crawls.scraping.runner import CrawlSession, live_stats
from crawls.services.shards import Shard
from crawls.shutdown import shutdown_requested
from items.ingestion import Ingestion
from items.services import item_fingerprint, items_upsert

logger = logging.getLogger("trawl.jobs")
# Trawl's own database or Redis being unreachable, locked or restarting: never the site's fault. Not IntegrityError
# and the like: those are bugs (or the job's row is gone) and waiting would only hold the worker.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
FLUSH_BUDGET_SECONDS = 0.3  # per tick, so heartbeats and cancel checks still happen on time
SCRAPY_STATS_SECONDS = 0.5  # how often a frontier crawl reads Scrapy's stats to record with its stored items


def database_reconnect() -> None:
    """Drop this thread's database connection after an error, so the next query opens a new one. Django never
    reopens a broken connection outside a request: after a PostgreSQL restart every later tick of a crawl failed with
    "the connection is lost" until the patience ran out, and the requeue that followed failed the same way (mixed
    chaos soak)."""
    with contextlib.suppress(*DATABASE_UNAVAILABLE):
        connection.close()


class JobTracker:
    """Called every tick from the task thread: upserts new items, heartbeats, and notices cancel or lost ownership."""

    def __init__(self, job: CrawlJob, *, shard: Shard | None = None) -> None:
        self.job = job
        self.shard = shard  # the job's frontier in Redis, when this crawl uses it
        self.handed_back = False  # a warm shutdown requeued the job
        self.last_scrapy_read = 0.0
        self.scrapy_progress: dict[str, Any] = {}
        self.counts: Counter = Counter()
        self.seen: set[str] = set()
        self.discovered: dict[str, dict[str, Any]] = {}  # links reported with `discovered(url)`, by URL
        self.ingestion = Ingestion.for_job(job)  # the version's item schema: invalid items never reach the upsert
        self.tenant_id = job_tenant_id(job)  # whose items these are: looked up once, not for every chunk
        self.heartbeat_every = settings.TRAWL_HEARTBEAT_SECONDS
        self.last_beat = self.last_progress = time.monotonic()
        self.pending: list[dict[str, Any]] = []  # drained but not written yet (the database refused them)
        self.pending_drained = 0  # how many drained items `pending` stands for (the frontier's write-ahead count)
        self.db_down_since: float | None = None

    def __call__(self, session: CrawlSession) -> str:
        try:
            self.flush(session, budget=FLUSH_BUDGET_SECONDS)
            reason = self._beat(session)
        except FrontierLost:
            return "infrastructure"  # Redis lost the job's frontier: stop; _job_run requeues the job to start again
        except DATABASE_UNAVAILABLE as exc:
            # Trawl's database, not the site: keep the items, let the crawl wait, try again next tick (bounded).
            self.db_down_since = self.db_down_since or time.monotonic()
            logger.warning("job %s: database error during the crawl (%s); retrying", self.job.pk, exc)
            database_reconnect()
            if time.monotonic() - self.db_down_since >= settings.TRAWL_INFRA_PATIENCE_SECONDS:
                return "infrastructure"
            return ""
        self.db_down_since = None
        return reason

    def _beat(self, session: CrawlSession) -> str:
        if self.shard is not None and shutdown_requested():
            if not self.handed_back:
                logger.warning("job %s: SIGTERM, handing the running crawl back to the queue", self.job.pk)
                self.handed_back = True
                self.shard.requeue_now()
            return "shutdown"
        # Every tick, not every heartbeat: one EXISTS a tick is cheap, and a cancel must land within about a second.
        if self._cancel_asked():
            return "cancelled"
        beat_due = time.monotonic() - self.last_beat >= self.heartbeat_every
        if not beat_due and time.monotonic() - self.last_progress < PROGRESS_SECONDS:
            return ""
        self.last_progress = time.monotonic()
        scrapy_stats = live_stats(session)
        if scrapy_stats.get("trawl/infrastructure_errors"):
            return "infrastructure"  # Redis stayed away past the throttle's patience: stop, the job is requeued
        progress = {**job_stats(scrapy_stats), **self.item_counts()}
        if self.shard is not None:  # the job's numbers: every shard's, over every attempt
            progress = self.shard.total(progress)
        progress_store(job_id=self.job.pk, stats=progress)  # every second, for `crawl --wait`
        if not beat_due:
            return ""
        self.last_beat = time.monotonic()
        beat = CrawlJob.objects.filter(pk=self.job.pk, status=JobStatus.RUNNING, attempt=self.job.attempt)
        if not beat.update(heartbeat_at=timezone.now(), stats=progress):
            return "lost"
        return ""

    def _cancel_asked(self) -> bool:
        # Redis away for a moment must not kill a crawl that only needs the database: ask again next beat.
        try:
            return cancel_requested(job_id=self.job.id)
        except redis.RedisError as exc:
            logger.warning("job %s: cancel flag unreadable (%s); asking again next tick", self.job.pk, exc)
            return False

    def flush(self, session: CrawlSession, *, budget: float | None = None) -> None:
        """Upsert queued items chunk by chunk until none are left, or (during a crawl) until `budget` seconds passed.

        Draining everything each tick keeps a fast crawl from leaving a backlog to write after it ends.
        """
        deadline = None if budget is None else time.monotonic() + budget
        while True:
            if not self.pending_drained:
                batch = session.drain(settings.TRAWL_ITEM_CHUNK)
                self.pending, self.pending_drained = self._fresh(batch), len(batch)
            drained = self.pending_drained
            if self.pending:
                # Raises when the database refuses: `pending` is kept for next time.
                self.counts.update(items_upsert(job=self.job, items=self.pending, tenant_id=self.tenant_id))
            self.pending, self.pending_drained = [], 0
            if drained and self.shard is not None:
                # Stored: out of the shard's write-ahead log in Redis, with this shard's stats at that moment.
                self.shard.frontier.stored(drained, progress=self._progress_now(session))
            if not drained or (deadline is not None and time.monotonic() >= deadline):
                break
        if self.shard is not None:
            self._adopt_orphans()

    def _fresh(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The same item seen twice in one crawl counts once.
        valid = self.ingestion.clean([data for data in batch if not self._discovery(data)])
        return [data for data in valid if self._first_sighting(data)]

    def _store(self, batch: list[dict[str, Any]]) -> None:
        if fresh := self._fresh(batch):
            self.counts.update(items_upsert(job=self.job, items=fresh, tenant_id=self.tenant_id))

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

    def item_counts(self) -> dict[str, int]:
        return {f"items_{change}": self.counts.get(change, 0) for change in ("new", "changed", "unchanged")} | {
            "items": sum(self.counts.values()),
            **self.ingestion.stats(),  # items_invalid (not in `items`) and invalid_sample
        }
