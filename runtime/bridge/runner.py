"""The crochet bridge: run one spider in the process's reactor and wait for it from a Celery task."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import crochet
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.utils.defer import deferred_from_coro

from runtime.bridge.handoff import item_passed
from runtime.bridge.logcapture import job_log_crawler, job_log_current, job_log_thread
from runtime.bridge.reactor import ensure_reactor
from runtime.bridge.stopping import crawl_stop
from runtime.bridge.tracebacks import exception_report, failure_report, item_error_report, spider_error_report
from runtime.frontier.scheduler import store_wanted, wake_engine
from runtime.settings.enforced import crawler_create

logger = logging.getLogger("trawl.jobs")

STOP_GRACE_SECONDS = 60
ITEM_QUEUE_MAX = 2000  # items not yet upserted: past it the reactor waits for room instead of buffering a crawl
BUSY_TICK_SECONDS = 0.05  # how soon the task thread drains again when a backlog of items is waiting
ITEM_BACKLOG = 200  # items queued that make a backlog (a chunk's worth: crawls.services.ingestion stores it now)
# The longest the reactor waits for one tick (reactor_held): a slower tick goes on beside the crawl, not stalling it.
REACTOR_HOLD_MAX_SECONDS = 0.5


@dataclass
class CrawlSession:
    """State shared between the reactor thread (writes) and the task thread (reads)."""

    items: queue.Queue = field(default_factory=lambda: queue.Queue(maxsize=ITEM_QUEUE_MAX))
    abandoned: bool = False  # the task thread no longer drains: the reactor must not wait for room any more
    crawler: Crawler | None = None
    final_stats: dict[str, Any] | None = None
    finish_reason: str = ""
    first_spider_error: str = ""
    reported_stats: dict[str, Any] = field(default_factory=dict)  # sent by a crawl in a child process (packaged.py)
    screenshots: list = field(default_factory=list)  # taken by a crawl in a child process, checked on receipt
    error_pages: list = field(default_factory=list)  # kept by a crawl in a child process, checked on receipt
    recording: Any = None  # a crawl in a child process records into this worker's Recording (runtime/replay)
    # Wakes the task thread before its tick is up: the crawl ended, or it waits for its items to be stored.
    wake: threading.Event = field(default_factory=threading.Event)
    store_wanted: bool = False
    store_now: bool = False  # this tick stores the queued items whenever they came: the crawl waits for them
    reactor_held: bool = False  # the reactor thread waits for the task thread's tick (reactor_held)

    def on_store_wanted(self) -> None:
        """The crawl is idle until the items it wrote ahead are stored (runtime.frontier.scheduler): tick now."""
        self.store_wanted = True
        self.wake.set()

    def on_item(self, data: dict[str, Any]) -> None:
        while not self.abandoned:  # blocks the reactor while the queue is full: backpressure onto the crawl
            try:
                self.items.put(data, timeout=0.5)
                return
            except queue.Full:
                continue

    def on_spider_error(self, failure: Any, response: Any, spider: Spider) -> None:
        if not self.first_spider_error:
            self.first_spider_error = spider_error_report(failure, response)

    def on_item_error(self, item: Any, response: Any, spider: Spider, failure: Any) -> None:
        if not self.first_spider_error:
            self.first_spider_error = item_error_report(failure, response)

    def on_spider_closed(self, spider: Spider, reason: str) -> None:
        self.finish_reason = reason
        self.final_stats = dict(self.crawler.stats.get_stats()) if self.crawler else {}

    def drain(self, limit: int) -> list[dict]:
        batch = []
        while len(batch) < limit:
            try:
                batch.append(self.items.get_nowait())
            except queue.Empty:
                break
        return batch


@dataclass
class CrawlResult:
    stats: dict[str, Any]
    finish_reason: str
    stopped_because: str  # "" when the crawl ended by itself, else "timeout", "cancelled", "lost"
    crawl_error: str  # the spider failed to start or crashed outside a callback
    first_spider_error: str


@crochet.run_in_reactor
def _start(spider_cls: type[Spider], settings: dict, spider_kwargs: dict, session: CrawlSession, log: Any = None):
    # The crawl's start-up records (components enabled, settings overridden, the spider opened) carry no spider:
    # while the reactor thread builds and opens this crawl, they are this crawl's (bridge.logcapture).
    with job_log_thread(log):
        return _started(spider_cls, settings, spider_kwargs, session)


def _started(spider_cls: type[Spider], settings: dict, spider_kwargs: dict, session: CrawlSession) -> Any:
    runner, crawler = crawler_create(spider_cls, settings)
    # weak=False: these are bound methods of a short-lived object that nothing else references.
    crawler.signals.connect(session.on_item, signal=item_passed, weak=False)
    crawler.signals.connect(session.on_spider_error, signal=signals.spider_error, weak=False)
    crawler.signals.connect(session.on_item_error, signal=signals.item_error, weak=False)
    crawler.signals.connect(session.on_spider_closed, signal=signals.spider_closed, weak=False)
    crawler.signals.connect(session.on_store_wanted, signal=store_wanted, weak=False)
    session.crawler = crawler
    crawl = runner.crawl(crawler, **spider_kwargs)
    crawl.addBoth(_woken, session)
    return crawl


def _woken(result: Any, session: CrawlSession) -> Any:
    session.wake.set()
    return result


@crochet.run_in_reactor
def _nudge(crawler: Crawler) -> None:
    wake_engine(crawler)


_stopping: set[Any] = set()  # stops under way, each kept alive until it is done


@crochet.run_in_reactor
def _stop(crawler: Crawler) -> None:
    """Ask the crawler to stop, and return at once: the crawl's own Deferred says when its engine has closed. The
    stop's Deferred is not handed to crochet, which logs an EventualResult dropped before it fires as an unhandled
    error (a CRITICAL line in the job's log after the job ended)."""
    stopping = deferred_from_coro(crawl_stop(crawler))  # runtime.bridge.stopping: sends nothing more
    _stopping.add(stopping)
    stopping.addErrback(lambda failure: logger.warning("stopping the crawl failed: %s", failure_report(failure)))
    stopping.addBoth(lambda _: _stopping.discard(stopping))


def stats_copy(crawler: Crawler) -> dict[str, Any]:
    # `_stats`, not `stats`: a spider that refused to start (bad options) leaves it unset, and Scrapy's `stats` raises.
    stats = crawler._stats
    return dict(stats.get_stats()) if stats else {}


_snapshot = crochet.wait_for(timeout=10)(stats_copy)  # the copy made in the reactor thread


def live_stats(session: CrawlSession) -> dict[str, Any]:
    """Stats of a running crawl, copied inside the reactor thread so no dict changes under us."""
    if session.crawler is None:
        return dict(session.reported_stats)
    if session.reactor_held:  # nothing runs in the reactor thread now: read them here (it could not answer)
        return stats_copy(session.crawler)
    try:
        return _snapshot(session.crawler)
    except crochet.TimeoutError:
        return {}


def run_spider(
    *,
    spider_cls: type[Spider],
    settings: dict,
    spider_kwargs: dict,
    timeout: float,
    on_tick: Callable[[CrawlSession], str],
    tick_seconds: float = 1.0,
    on_session: Callable[[CrawlSession], None] | None = None,
) -> tuple[CrawlResult, CrawlSession]:
    """Run a crawl to its end, calling `on_tick` every tick from this thread.

    `on_tick` drains items and heartbeats; a non-empty return ("cancelled", "lost") asks the crawl to stop. On timeout
    or stop the crawler itself is stopped: cancelling crochet's result would leave the engine running.
    """
    ensure_reactor()
    session = CrawlSession()
    if on_session is not None:  # before the crawl starts: its spider is known from its first moment
        on_session(session)
    job_log_crawler(lambda: session.crawler)  # the records of its spider go to its job's log, from any thread
    _crawls_running_count(+1)
    try:
        result = _start(spider_cls, settings, spider_kwargs, session, job_log_current())
        try:
            stopped_because, crawl_error = _wait(result, session, timeout=timeout, on_tick=on_tick, tick=tick_seconds)
        except BaseException:
            # The tick raised (database error, Celery's soft time limit...): the crawl must not outlive this call.
            session.abandoned = True
            _stop_and_wait(result, session)
            raise
    finally:
        _crawls_running_count(-1)
    session.abandoned = True
    stats = session.final_stats if session.final_stats is not None else live_stats(session)
    if session.finish_reason:
        # Scrapy records the reason after our spider_closed handler copied the stats.
        stats["finish_reason"] = session.finish_reason
    crawl_result = CrawlResult(
        stats=stats,
        finish_reason=session.finish_reason,
        stopped_because=stopped_because,
        crawl_error=crawl_error,
        first_spider_error=session.first_spider_error,
    )
    return crawl_result, session


def _wait(result: Any, session: CrawlSession, *, timeout: float, on_tick: Callable, tick: float) -> tuple[str, str]:
    """Tick until the crawl ends; ("timeout" | "cancelled" | "lost" | "", crawl error)."""
    deadline = time.monotonic() + timeout
    stopped_because, stop_deadline = "", None
    while True:
        session.wake.wait(BUSY_TICK_SECONDS if session.items.qsize() >= ITEM_BACKLOG else tick)
        session.wake.clear()
        try:
            result.wait(timeout=0)
            return stopped_because, ""
        except crochet.TimeoutError:
            pass
        except Exception as exc:  # the crawl's Deferred failed: the spider could not start or crashed
            logger.error("the crawl failed: %s", exception_report(exc))
            return stopped_because, exception_report(exc)
        nudge, session.store_wanted = session.store_wanted, False
        session.store_now = nudge
        with reactor_held(session):
            reason = on_tick(session)
        if nudge and session.crawler is not None:
            _nudge(session.crawler)  # stored: the idle crawl asks its frontier again now, not at its next poll
        if not stopped_because:
            if time.monotonic() >= deadline:
                reason = "timeout"
            if reason == "cancelled" and session.finish_reason:
                reason = ""  # the spider closed by itself first: a late cancel does not rewrite its outcome
            if reason and session.crawler is not None:
                stopped_because = reason
                stop_deadline = time.monotonic() + STOP_GRACE_SECONDS
                _stop(session.crawler)
        elif stop_deadline and time.monotonic() >= stop_deadline:
            result.cancel()
            return stopped_because, ""


_crawls_running, _crawls_running_lock = 0, threading.Lock()


def crawls_running() -> int:
    """How many crawls this process runs now (a crawl host runs several on one reactor: project/pools/crawlhost.py)."""
    return _crawls_running


def _crawls_running_count(change: int) -> None:
    global _crawls_running
    with _crawls_running_lock:
        _crawls_running += change


@contextmanager
def reactor_held(session: CrawlSession, limit: float = REACTOR_HOLD_MAX_SECONDS) -> Iterator[None]:
    """Keep the reactor thread waiting while this thread works, for at most `limit` seconds, while it is the process's
    one crawl: a busy task thread beside the reactor costs the crawl far more than its own CPU under the GIL (see
    bench/README.md; 50 crawls' ticks held their shared reactor 16 s of 30). `live_stats` reads the stats directly."""
    # A full item queue means the reactor may itself be waiting for this thread to drain it: do not wait for it.
    if session.crawler is None or session.items.full() or crawls_running() > 1:
        yield
        return
    from twisted.internet import reactor

    waiting, release = threading.Event(), threading.Event()
    reactor.callFromThread(_wait_for_release, waiting, release, limit)
    session.reactor_held = waiting.wait(limit)
    if not session.reactor_held:  # the reactor is busy: when it gets there it goes straight on
        release.set()
    try:
        yield
    finally:
        session.reactor_held = False
        release.set()


def _wait_for_release(waiting: threading.Event, release: threading.Event, limit: float) -> None:
    waiting.set()
    release.wait(limit)


def _stop_and_wait(result: Any, session: CrawlSession) -> None:
    """Stop the crawler and wait (bounded) until its engine has closed; never raises."""
    try:
        if session.crawler is not None:
            _stop(session.crawler)
        result.wait(timeout=STOP_GRACE_SECONDS)
    except BaseException:  # the original exception is the one the caller must see
        result.cancel()
