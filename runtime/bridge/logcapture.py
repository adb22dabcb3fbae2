"""Capturing a worker process's log records while it runs one job attempt, into that attempt's job log.

A crawl runs in the reactor thread while the task thread waits, one crawl per process at a time, so every record the
process emits during the attempt belongs to it. The `scrapy` logger (WARNING in LOGGING) and the root logger are
lowered to the job's level for the attempt only, and a filter keeps the worker's console as quiet as it was.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator

import redis

from runtime.bridge.joblog import JobLogSink, record_line

logger = logging.getLogger("trawl.joblog")
LOWERED = ("root", "scrapy")  # loggers whose level the attempt lowers (the others inherit from these)
SECRET_MESSAGES = ("Overridden settings",)  # Scrapy prints setting values: credentials of FEEDS storages among them
_active: JobLogCapture | None = None


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


def job_log_level(*, level: str) -> None:
    """Set the running attempt's level (a scraper's or version's LOG_LEVEL); no-op outside an attempt."""
    if _active is not None:
        numeric = _level(level)
        _active.setLevel(numeric)
        for name in LOWERED:
            _logger(name).setLevel(min(_logger(name).getEffectiveLevel(), numeric))


def job_log_flush() -> None:
    """Write what the running attempt logged so far now, not at the next flush (no-op outside an attempt). Called
    as a job ends: whoever sees its final status finds its log, however short the job was."""
    if isinstance(_active, JobLogCapture):
        _active.flush_pending()


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == "root" else logging.getLogger(name)


@contextlib.contextmanager
def log_handler_installed(capture: logging.Handler) -> Iterator[None]:
    """The handler on the root logger, the console filtered as before; every level restored afterwards. Also used by
    a packaged version's child process (runtime.packaged.child), whose handler forwards records to its worker."""
    global _active
    root = logging.getLogger()
    levels_before = {name: _logger(name).level for name in LOWERED}
    console = ConsoleAsBefore({name: _logger(name).getEffectiveLevel() for name in LOWERED})
    existing = list(root.handlers)
    for handler in existing:
        handler.addFilter(console)
    root.addHandler(capture)
    _active = capture
    try:
        yield
    finally:
        _active = None
        root.removeHandler(capture)
        for handler in existing:
            handler.removeFilter(console)
        for name, level in levels_before.items():
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
