"""Capturing a worker process's log records while it runs job attempts, each record into its own attempt's job log.

A crawl runs in the reactor thread while its task thread waits, and a process may run several crawls at once
(TRAWL_CRAWLS_PER_PROCESS): CaptureRouter tells which crawl a record belongs to. The `scrapy` logger (WARNING in
LOGGING) and the root logger are lowered to the attempts' levels while any attempt runs, and a filter keeps the
worker's console as quiet as it was.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator

import redis

from project.pools.hosted import TASK_THREAD_PREFIX
from runtime.bridge.joblog import JobLogSink, record_line

logger = logging.getLogger("trawl.joblog")
LOWERED = ("root", "scrapy")  # loggers whose level the attempt lowers (the others inherit from these)
SECRET_MESSAGES = ("Overridden settings",)  # Scrapy prints setting values: credentials of FEEDS storages among them


class JobLogCapture(logging.Handler):
    """Keeps records in memory; `flush_pending` (a background thread, then the end of the attempt) writes them."""

    def __init__(self, *, sink: JobLogSink, level: int) -> None:
        super().__init__(level)
        self.sink = sink
        self.pending: list[str] = []
        self.max_chars = sink.limits.line_chars
        self.writing = threading.Lock()  # one flush at a time (the flusher thread, the job's end): lines stay in order

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == logger.name and getattr(record, "joblog_internal", False):
            return  # our own complaints about Redis would otherwise feed the log they failed to write
        if isinstance(record.msg, str) and record.msg.startswith(SECRET_MESSAGES):
            record = _names_only(record)
        self.pending.append(record_line(record, max_chars=self.max_chars))

    def flush_pending(self) -> None:
        with self.writing:
            with self.lock:  # the handler's lock: `emit` runs under it, in whichever thread logged
                lines, self.pending = self.pending, []
            try:
                self.sink.write(lines)
            except redis.RedisError as exc:
                with self.lock:  # kept for the next flush; the sink's cap bounds what Redis ends up holding
                    self.pending = lines[-self.sink.limits.max_lines :] + self.pending
                logger.warning("job log not written yet (%s); retrying", exc, extra={"joblog_internal": True})


def _names_only(record: logging.LogRecord) -> logging.LogRecord:
    """Scrapy's "Overridden settings" record with the setting names only (their values may hold credentials)."""
    copy = logging.makeLogRecord(record.__dict__)
    names = sorted(set(re.findall(r"'([A-Z][A-Z0-9_]+)':", record.getMessage())))
    copy.msg, copy.args = "Overridden settings (values not logged): %s", (", ".join(names),)
    return copy


class ConsoleAsBefore(logging.Filter):
    """On the handlers that existed before, drop what the lowered levels let through and used to be dropped."""

    def __init__(self, originals: dict[str, int]) -> None:
        super().__init__()
        self.originals = originals

    def filter(self, record: logging.LogRecord) -> bool:
        current = logging.getLogger(record.name)
        while current is not None:
            level = self.originals.get(current.name, current.level)
            if level:
                return record.levelno >= level
            current = current.parent
        return True


def _level(name: str) -> int:
    level = logging.getLevelName(str(name).upper())
    return level if isinstance(level, int) else logging.INFO


class CaptureRouter(logging.Handler):
    """On the root logger while any attempt of this process is captured: each record goes to the one crawl it
    belongs to. Several crawls share a process's reactor (TRAWL_CRAWLS_PER_PROCESS), so "whatever the process logs"
    no longer names a crawl: a record carrying a `spider` (Scrapy's and every spider's own records) goes to that
    spider's crawl; a record of a thread a crawl owns (its task thread) to that crawl; with one crawl in the process,
    everything else goes to it, as before, but the records of a crawl host's other task threads. Anything else (a
    reactor record of no spider while several crawl) stays in the worker's log: never in another job's."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.captures: tuple[logging.Handler, ...] = ()
        self.threads: dict[int, logging.Handler] = {}
        self.spiders: dict[int, Callable[[], object]] = {}  # id(capture) → the crawler of its crawl, once it runs

    def owner(self, record: logging.LogRecord) -> logging.Handler | None:
        captures = self.captures
        spider = getattr(record, "spider", None)
        if spider is not None:
            crawler = getattr(spider, "crawler", None)
            for capture in captures:
                crawler_of = self.spiders.get(id(capture))
                if crawler_of is not None and (current := crawler_of()) is not None and current is crawler:
                    return capture
        by_thread = self.threads.get(record.thread) if record.thread is not None else None
        if by_thread is not None:
            return by_thread
        if len(captures) != 1 or (record.threadName or "").startswith(TASK_THREAD_PREFIX):
            return None  # another task of a crawl host (a message that claimed nothing, say): not this crawl's
        return captures[0]

    def emit(self, record: logging.LogRecord) -> None:
        capture = self.owner(record)
        if capture is not None and record.levelno >= capture.level:
            capture.handle(record)


_router = CaptureRouter()
_registry = threading.Lock()  # who joins and leaves the router; `owner` reads the tuples and dicts it replaces
_console: ConsoleAsBefore | None = None
_levels_before: dict[str, int] = {}


def _current() -> logging.Handler | None:
    """The capture of the attempt this thread runs (or the only one of the process)."""
    capture = _router.threads.get(threading.get_ident())
    if capture is None and len(_router.captures) == 1:
        capture = _router.captures[0]
    return capture


def job_log_level(*, level: str) -> None:
    """Set the running attempt's level (a scraper's or version's LOG_LEVEL); no-op outside an attempt. The loggers
    themselves go as low as the lowest attempt of the process asks; each attempt's capture keeps its own level."""
    capture = _current()
    if capture is not None:
        numeric = _level(level)
        capture.setLevel(numeric)
        for name in LOWERED:
            _logger(name).setLevel(min(_logger(name).getEffectiveLevel(), numeric))


def job_log_flush() -> None:
    """Write what the running attempt logged so far now, not at the next flush (no-op outside an attempt; from a
    thread of no attempt, every attempt of the process). Called as a job ends: whoever sees its final status finds
    its log, however short the job was."""
    capture = _router.threads.get(threading.get_ident())
    for each in (capture,) if capture is not None else _router.captures:
        if isinstance(each, JobLogCapture):
            each.flush_pending()


def job_log_current() -> logging.Handler | None:
    """The capture of this thread's attempt, for a thread of the same crawl to join (`job_log_thread`)."""
    return _current()


@contextlib.contextmanager
def job_log_thread(capture: logging.Handler | None) -> Iterator[None]:
    """While inside, this thread's records belong to `capture`'s attempt (a crawl's hand-back thread, say)."""
    if capture is None:
        yield
        return
    ident = threading.get_ident()
    with _registry:
        before = _router.threads.get(ident)
        _router.threads = {**_router.threads, ident: capture}
    try:
        yield
    finally:
        with _registry:
            threads = dict(_router.threads)
            if before is None:
                threads.pop(ident, None)
            else:
                threads[ident] = before
            _router.threads = threads


def job_log_crawler(crawler_of: Callable[[], object]) -> None:
    """The running attempt's crawl: records carrying its spider go to its log, whichever thread logs them."""
    capture = _current()
    if capture is not None:
        with _registry:
            _router.spiders = {**_router.spiders, id(capture): crawler_of}


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == "root" else logging.getLogger(name)


@contextlib.contextmanager
def log_handler_installed(capture: logging.Handler) -> Iterator[None]:
    """The handler joins the process's router (on the root logger from the first attempt, the console filtered as
    before) for this thread's attempt; with the last attempt out, every level is restored. Also used by a packaged
    version's child process (runtime.packaged.child), whose handler forwards records to its worker."""
    _joined(capture)
    try:
        yield
    finally:
        _left(capture)


def _joined(capture: logging.Handler) -> None:
    global _console, _levels_before
    root = logging.getLogger()
    with _registry:
        if not _router.captures:
            _levels_before = {name: _logger(name).level for name in LOWERED}
            _console = ConsoleAsBefore({name: _logger(name).getEffectiveLevel() for name in LOWERED})
            for handler in list(root.handlers):
                handler.addFilter(_console)
            root.addHandler(_router)
        _router.captures = (*_router.captures, capture)
        _router.threads = {**_router.threads, threading.get_ident(): capture}


def _left(capture: logging.Handler) -> None:
    root = logging.getLogger()
    with _registry:
        _router.captures = tuple(each for each in _router.captures if each is not capture)
        _router.threads = {ident: each for ident, each in _router.threads.items() if each is not capture}
        _router.spiders = {key: each for key, each in _router.spiders.items() if key != id(capture)}
        if _router.captures:
            return
        root.removeHandler(_router)
        for handler in list(root.handlers):
            handler.removeFilter(_console)
        for name, level in _levels_before.items():
            _logger(name).setLevel(level)


@contextlib.contextmanager
def records_captured(*, sink: JobLogSink, store: Callable[..., object], level: str = "INFO") -> Iterator[JobLogCapture]:
    """Record the process's log into the job's log (in Redis, through `sink`) for the duration; at the end, `store`
    keeps it (crawls moves it to the database: `store(job_id=, attempt=, shard=)`)."""
    capture = JobLogCapture(sink=sink, level=_level(level))
    stop = threading.Event()
    flusher = threading.Thread(target=_flush_every, args=(capture, stop), name="joblog-flush", daemon=True)
    try:
        with log_handler_installed(capture):
            job_log_level(level=level)
            flusher.start()
            try:
                yield capture
            finally:
                stop.set()
                flusher.join(5)
    finally:
        capture.flush_pending()
        _store(store, job_id=sink.job_id, attempt=sink.attempt, shard=sink.shard)


def _flush_every(capture: JobLogCapture, stop: threading.Event) -> None:
    while not stop.wait(capture.sink.limits.flush_seconds):
        capture.flush_pending()


def _store(store: Callable[..., object], *, job_id: object, attempt: int, shard: int) -> None:
    # A log that cannot be stored stays in Redis (readable until its TTL): never a reason to fail the job.
    try:
        store(job_id=job_id, attempt=attempt, shard=shard)
    except Exception as exc:
        logger.warning("job %s attempt %s: log left in Redis: %s: %s", job_id, attempt, type(exc).__name__, exc)
