"""A job's heartbeat, kept by a thread of its own from the claim until the job's outcome is written.

The crawl's tick also heartbeats (with progress), but a tick can be slow — a long upsert on a busy database, the final
flush of thousands of items, source discovery writing tens of thousands of rows, `job_end` itself. The reaper would
call such a live job stale and run it a second time. This thread writes only `heartbeat_at`, on its own database
connection, and stops once the job has left `running` or the outcome is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus

logger = logging.getLogger("trawl.jobs")


def heartbeat_write(*, job_id: object, attempt: int) -> bool:
    """Touch the job's heartbeat if this attempt still runs it; False when it no longer does."""
    running = CrawlJob.objects.filter(pk=job_id, status=JobStatus.RUNNING, attempt=attempt)
    return bool(running.update(heartbeat_at=timezone.now()))


class HeartbeatThread(threading.Thread):
    def __init__(self, *, job_id: object, attempt: int, every: float) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.job_id, self.attempt, self.every = job_id, attempt, every
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(self.every):
                try:
                    if not heartbeat_write(job_id=self.job_id, attempt=self.attempt):
                        return  # ended, cancelled or taken over: nothing left to keep alive
                except DatabaseError as exc:  # a locked or restarting database: beat again next time
                    logger.warning("job %s: heartbeat not written (%s); trying again", self.job_id, exc)
                    # On a new connection: Django never reopens a broken one outside a request, so after a database
                    # restart every later beat failed with "the connection is closed" (mixed chaos test).
                    with suppress(DatabaseError):
                        connection.close()
        finally:
            connection.close()  # this thread's own connection


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
