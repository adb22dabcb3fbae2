"""A crawl process's reactor watchdog (runtime.bridge.watchdog): started with the pool process, watching each crawl
while it runs, and what handing a crawl back means for its job when the reactor stalls.

A stalled crawl's job is requeued through its frontier like a warm shutdown's (its in-flight requests go back to the
queue, the next attempt continues from there); the suspect spends an attempt (`reactor_stalled`: after its last it
ends `failed` with that error class), a bystander of another crawl's stall does not (`process_recycled`). The stall
is in the attempt's log, with the reactor's stack, and counted in the job's stats (`reactor_stalls`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial

import redis
from django.conf import settings
from django.db import connection

from crawls.logs.joblog import job_log_store
from crawls.models import CrawlJob
from crawls.services.lifecycle import AttemptCause, job_attempt_over
from crawls.services.liveness import CrawlTick, heartbeat_write
from crawls.services.shards import Shard
from runtime.bridge.logcapture import job_log_current, job_log_flush, job_log_thread
from runtime.bridge.runner import stats_copy
from runtime.bridge.watchdog import ReactorWatchdog, Stall

logger = logging.getLogger("trawl.jobs")
_watchdog: ReactorWatchdog | None = None


def watchdog_start() -> ReactorWatchdog | None:
    """In a crawl pool process once its reactor runs (worker_process_init). Not in a solo or threads pool: ending
    that process would end the whole worker."""
    global _watchdog
    seconds = float(settings.TRAWL_REACTOR_STALL_SECONDS)
    if _watchdog is None and seconds > 0:
        from twisted.internet import reactor

        _watchdog = ReactorWatchdog(stall_seconds=seconds, call_in_reactor=reactor.callFromThread).start()
    return _watchdog


@contextmanager
def reactor_watched(*, job: CrawlJob, tick: CrawlTick, shard: Shard | None) -> Iterator[None]:
    """While inside, a stall of this process's reactor hands this crawl back (no-op without a watchdog)."""
    if _watchdog is None:
        yield
        return
    index = shard.index if shard is not None else 0
    key = f"{job.pk}/{job.attempt}/{index}"
    hand_back = partial(_handing_back, job=job, shard=shard, tick=tick, log=job_log_current())
    with _watchdog.watching(key, hand_back=hand_back, crawler=lambda: tick.session and tick.session.crawler):
        yield


def _handing_back(
    stall: Stall, suspect: bool, *, job: CrawlJob, shard: Shard | None, tick: CrawlTick, log: object
) -> None:
    """On a hand-back thread of the watchdog's: with that thread's own database connection, closed after, and its
    records in the crawl's own job log (the process may hold several crawls)."""
    try:
        with job_log_thread(log):
            crawl_hand_back(stall, suspect, job=job, shard=shard, tick=tick)
    finally:
        with suppress(Exception):
            connection.close()


def crawl_hand_back(
    stall: Stall, suspect: bool, *, job: CrawlJob, shard: Shard | None, tick: CrawlTick | None = None
) -> None:
    """As the process is about to end: the crawl's requests back to its frontier, what this attempt did and the stall
    counted in its stats, the job requeued (or ended), the attempt's log kept."""
    returned = 0
    if shard is not None:
        returned = shard.frontier.release()
        if tick is not None:
            _attempt_numbers_kept(tick)
        stats = shard.stall_counted("reactor_stalls" if suspect else "process_recycled")
        heartbeat_write(job_id=job.pk, attempt=job.attempt, stats=stats)  # while this attempt still runs it
    why = "its crawl held" if suspect else "another crawl of its process held"
    reason = (
        f"{why} the process's reactor: no answer for {stall.silent_for:.0f}s (TRAWL_REACTOR_STALL_SECONDS); "
        f"the process was replaced and {returned} request(s) went back to the frontier"
    )
    # In this crawl's own log (this thread is its: _handing_back); the watchdog's own line names every crawl.
    logger.error("job %s: %s. The reactor thread was at:\n%s", job.pk, reason, stall.stack)
    cause = AttemptCause.REACTOR_STALLED if suspect else AttemptCause.PROCESS_RECYCLED
    end_message = f"{reason}, on its last attempt ({job.attempt}). The reactor thread was at:\n{stall.stack}"
    job_attempt_over(job=job, cause=cause, reason=reason, end_message=end_message)
    job_log_flush()
    job_log_store(job_id=job.pk, attempt=job.attempt, shard=shard.index if shard is not None else 0)


def _attempt_numbers_kept(tick: CrawlTick) -> None:
    """This attempt's numbers so far into the job's: a crawl that was done with its pages when another crawl wedged
    the reactor (its items stored, its stats not yet) must not look, to its next attempt, like one that made no
    requests. Read straight from the crawler: its reactor thread is stuck and cannot copy them."""
    crawler = tick.session.crawler if tick.session is not None else None
    if crawler is None:
        return
    with suppress(RuntimeError, redis.RedisError):  # changed under us by the reactor thread, or Redis away: skip
        tick.progress(stats_copy(crawler))
