"""Liveness: whether a running crawl should go on, and the heartbeat that tells the reaper it does.

Every tick (CrawlTick, called from the task thread) stores the items that arrived (crawls.services.ingestion), then
notices a cancel, a warm shutdown (SIGTERM: the job is handed back to the queue), a lost frontier, or Trawl's own
database gone for longer than TRAWL_INFRA_PATIENCE_SECONDS, records progress every second while `crawl --wait`
watches (crawls.live.progress), and heartbeats (with the progress) every TRAWL_HEARTBEAT_SECONDS while this attempt
still owns the job.

A tick can be slow — a long upsert on a busy database, the final flush of thousands of items, source discovery
writing tens of thousands of rows, `job_end` itself — and the reaper would call such a live job stale and run it a
second time. So a thread of its own (heartbeat_kept) also beats from the claim until the outcome is written, in Redis
(crawls.live.beats): the reaper calls a job stale only when the row's heartbeat and this beat are both old.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from crawls.live.beats import beat_write
from crawls.live.cancel import cancel_requested_watched, progress_watched
from crawls.live.progress import PROGRESS_SECONDS, progress_store
from crawls.models import CrawlJob, JobStatus
from crawls.services.ingestion import ItemIngest
from crawls.services.shards import Shard
from crawls.worker.shutdown import shutdown_requested
from project.pools.hosted import memory_recycling
from project.pools.memory import memory_suspect
from runtime.bridge.outcome import job_stats
from runtime.bridge.runner import CrawlSession, live_stats
from runtime.bridge.stats import crawl_stat
from runtime.frontier import FrontierLost

logger = logging.getLogger("trawl.jobs")
# Trawl's own database or Redis being unreachable, locked or restarting: never the site's fault. Not IntegrityError
# and the like: those are bugs (or the job's row is gone) and waiting would only hold the worker.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
FLUSH_BUDGET_SECONDS = 0.3  # per tick, so heartbeats and cancel checks still happen on time


def database_reconnect() -> None:
    """Drop this thread's database connection after an error, so the next query opens a new one. Django never
    reopens a broken connection outside a request: after a PostgreSQL restart every later tick of a crawl would fail
    with "the connection is lost" until the patience ran out, and the requeue that followed would fail the same way."""
    with suppress(*DATABASE_UNAVAILABLE):
        connection.close()


class CrawlTick:
    """Called every tick from the task thread; answers why the crawl must stop ("" to go on): "cancelled",
    "shutdown" (handed back to the queue), "lost" (another attempt owns the job), "infrastructure"."""

    def __init__(self, job: CrawlJob, *, ingest: ItemIngest, shard: Shard | None = None) -> None:
        self.job = job
        self.ingest = ingest
        self.shard = shard  # the job's frontier in Redis, when this crawl uses it
        self.handed_back = False  # a warm shutdown requeued the job
        self.handed_back_as: CrawlJob | None = None  # the job after it: queued again, or ended (its memory bound)
        self.heartbeat_every = settings.TRAWL_HEARTBEAT_SECONDS
        self.last_beat = self.last_progress = time.monotonic()
        self.db_down_since: float | None = None
        self.session: CrawlSession | None = None  # the crawl's, from its first tick (the reactor watchdog's suspect)

    def session_known(self, session: CrawlSession) -> None:
        """The crawl's session from before its start (an in-process crawl): its spider can be weighed at once."""
        self.session = session

    def __call__(self, session: CrawlSession) -> str:
        self.session = session
        try:
            if self.ingest.store_due(session):
                self.ingest.flush(session, budget=FLUSH_BUDGET_SECONDS)
            reason = self._beat(session)
        except FrontierLost:
            return "infrastructure"  # Redis lost the job's frontier: stop; the job is requeued to start again
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
                memory = memory_recycling()
                why = "its process is past its memory bound" if memory else "SIGTERM"
                logger.warning("job %s: %s, handing the running crawl back to the queue", self.job.pk, why)
                self.handed_back = True
                # This attempt's numbers recorded for the next to sum (unwatched, the last were a heartbeat ago), and
                # into the job's row first when its memory bound may end the job.
                stats = self.progress(live_stats(session))
                if memory:
                    heartbeat_write(job_id=self.job.pk, attempt=self.job.attempt, stats=stats)
                suspect = memory_suspect(f"{self.job.pk}:{self.shard.index}")
                self.handed_back_as = self.shard.requeue_now(memory=memory, suspect=suspect)
            return "shutdown"
        # Every tick, not every heartbeat: a cancel must land within about a second (one reading of every crawl's flag
        # per half second for the whole process: crawls.live.cancel.CancelWatch).
        if self._cancel_asked():
            return "cancelled"
        beat_due = time.monotonic() - self.last_beat >= self.heartbeat_every
        if not beat_due and time.monotonic() - self.last_progress < PROGRESS_SECONDS:
            return ""
        self.last_progress = time.monotonic()
        if crawl_stat(session, "trawl/infrastructure_errors"):
            return "infrastructure"  # Redis stayed away past the throttle's patience: stop, the job is requeued
        watched = progress_watched(job_id=self.job.id)  # as of the reading _cancel_asked made or used
        if not beat_due and not watched:
            return ""
        progress = self.progress(live_stats(session))
        if watched:
            progress_store(job_id=self.job.pk, stats=progress)  # every second, for `crawl --wait`
        if not beat_due:
            return ""
        self.last_beat = time.monotonic()
        return "" if heartbeat_write(job_id=self.job.pk, attempt=self.job.attempt, stats=progress) else "lost"

    def progress(self, scrapy_stats: dict[str, Any]) -> dict[str, Any]:
        """The job's numbers so far: with a frontier, every shard's over every attempt."""
        progress = {**job_stats(scrapy_stats), **self.ingest.item_counts()}
        return self.shard.total(progress) if self.shard is not None else progress

    def _cancel_asked(self) -> bool:
        # Redis away for a moment must not kill a crawl that only needs the database: ask again next beat.
        try:
            return cancel_requested_watched(job_id=self.job.id)
        except redis.RedisError as exc:
            logger.warning("job %s: cancel flag unreadable (%s); asking again next tick", self.job.pk, exc)
            return False


def heartbeat_write(*, job_id: object, attempt: int, stats: dict[str, Any] | None = None) -> bool:
    """Touch the job's heartbeat (and its stats so far) if this attempt still runs it; False when it no longer does.
    Not a change of status: the job stays `running`."""
    running, now = CrawlJob.objects.filter(pk=job_id, status=JobStatus.RUNNING, attempt=attempt), timezone.now()
    moved = running.update(heartbeat_at=now) if stats is None else running.update(heartbeat_at=now, stats=stats)
    return bool(moved)


class HeartbeatThread(threading.Thread):
    """Beats in Redis every `every` seconds until `done` (crawls.live.beats): no database connection of its own."""

    def __init__(self, *, job_id: object, attempt: int, every: float) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.job_id, self.attempt, self.every = job_id, attempt, every
        self.done = threading.Event()

    def run(self) -> None:
        while True:
            try:
                beat_write(job_id=self.job_id, attempt=self.attempt)
            except redis.RedisError as exc:  # Redis away for a moment: the job row's heartbeat still counts
                logger.warning("job %s: liveness beat not written (%s); trying again", self.job_id, exc)
            if self.done.wait(self.every):
                return


@contextmanager
def heartbeat_kept(*, job: CrawlJob) -> Iterator[HeartbeatThread]:
    """Keep the job's heartbeat fresh for as long as the block runs."""
    thread = HeartbeatThread(job_id=job.pk, attempt=job.attempt, every=settings.TRAWL_HEARTBEAT_SECONDS)
    thread.start()
    try:
        yield thread
    finally:
        thread.done.set()
        thread.join(timeout=settings.TRAWL_HEARTBEAT_SECONDS + 5)
