"""Running a packaged version's crawl in a child process of its environment, with run_spider's result shape.

The task thread pumps the child's messages (runtime.packaged.children) into a CrawlSession every tick, so the tick
(crawls.services.ingestion and liveness) upserts items, heartbeats and notices cancel exactly as for an in-process
crawl; stopping sends `stop` (the child calls `crawler.stop()`), and a child that has not finished
STOP_GRACE_SECONDS later is killed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from project.redis import REDIS_SETTING
from runtime.bridge.runner import STOP_GRACE_SECONDS, CrawlResult, CrawlSession
from runtime.packaged.channel import package_logger_name
from runtime.packaged.child_db import CallScope, db_call_answer
from runtime.packaged.child_redis import child_redis_keys
from runtime.packaged.children import Child, ChildPool, Unused, child_discard, child_for, child_return
from runtime.rendering.screenshots import screenshot_received
from runtime.replay.record import recording_for
from runtime.settings.project import ProjectLayer
from runtime.spec import CrawlSpec, PackageSpec
from runtime.watch.error_pages import error_page_received

logger = logging.getLogger("trawl.jobs")


def package_run(
    *, spec: CrawlSpec, unused: Unused, project: ProjectLayer | None = None, **crawl: Any
) -> tuple[CrawlResult, CrawlSession]:
    """run_spider's call for a packaged version (same keywords, the crawl's spec instead of the spider class;
    `unused`: registry's answer to which packages no version needs, asked when the child exits; `project`: the
    project's settings module and how it joins the composed settings)."""
    return run_packaged(package=spec.package, spider=spec.spider, unused=unused, project=project, **crawl)


def run_packaged(
    *,
    package: PackageSpec,
    spider: str,
    settings: dict,
    pool: ChildPool,
    spider_kwargs: dict,
    timeout: float,
    on_tick: Callable[[CrawlSession], str],
    tick_seconds: float = 1.0,
    unused: Unused | None = None,
    project: ProjectLayer | None = None,
) -> tuple[CrawlResult, CrawlSession]:
    """run_spider for a packaged version. Raises PackageUnavailable before the crawl if the package cannot run."""
    child = child_for(package, pool=pool, unused=unused)
    session, crawl_id = CrawlSession(), uuid.uuid4().hex
    scope = CallScope.of_crawl(settings=settings, spider_kwargs=spider_kwargs)
    settings = {**settings, REDIS_SETTING: child.redis.url}  # the child's own Redis user, never the worker's
    child_redis_keys(child.redis, crawl=settings)  # this crawl's frontier and incremental cache, no other's
    layer = project.message() if project is not None else None
    dropped_before = child.inbox.dropped
    child.send(cmd="crawl", job=crawl_id, spider=spider, settings=settings, kwargs=spider_kwargs, project=layer)
    deadline = time.monotonic() + timeout
    bounds = Bounds.of(settings)
    session.recording = recording_for(settings)  # items recorded here as they arrive; the WARC comes at the end
    stopped_because, stop_deadline, end = "", None, None
    try:
        while end is None:
            end = _pump(child, session, crawl_id, scope, wait=tick_seconds, bounds=bounds)
            if end is not None:
                break
            wake, session.store_wanted = session.store_wanted, False
            session.store_now = wake
            reason = on_tick(session)
            if wake:
                child.send(cmd="wake", job=crawl_id)
            if not stopped_because:
                reason = "timeout" if time.monotonic() >= deadline else reason
                if reason:
                    stopped_because, stop_deadline = reason, time.monotonic() + STOP_GRACE_SECONDS
                    child.send(cmd="stop", job=crawl_id)
            elif time.monotonic() >= stop_deadline:
                end = {"crawl_error": ""}
    finally:
        if end is None or end.get("t") != "end":
            # Killed, crashed, or this thread was interrupted (soft time limit): that child is in no state to reuse.
            child_discard(child)
    if end.get("t") == "end":
        child_redis_keys(child.redis)  # between crawls: the throttle's keys only
        child_return(child)
    else:
        session.recording = None  # its WARC comes just before `end`: items without their responses replay nothing
    stats = end["stats"] if isinstance(end.get("stats"), dict) else dict(session.reported_stats)
    if dropped := child.inbox.dropped - dropped_before:  # lines too long or not JSON (runtime.packaged.channel)
        stats = {**stats, "package/messages_dropped": dropped}
        logger.warning("the package's process sent %s messages too long or not JSON: dropped", dropped)
    session.final_stats, session.finish_reason = stats, end.get("reason", "")
    if end.get("crawl_error"):  # the child's traceback, in this job's log like an in-process crawl's
        logger.error("the crawl failed: %s", end["crawl_error"])
    result = CrawlResult(
        stats=stats,
        finish_reason=session.finish_reason,
        stopped_because=stopped_because,
        crawl_error=end.get("crawl_error", ""),
        first_spider_error=session.first_spider_error,
    )
    return result, session


@dataclass(frozen=True)
class Bounds:
    """What a job keeps of what its child sends besides items, at most (the child is not trusted to stop)."""

    screenshots: int
    error_pages: int
    error_page_bytes: int

    @classmethod
    def of(cls, settings: dict[str, Any]) -> Bounds:
        return cls(
            screenshots=int(settings["TRAWL_RENDER_SCREENSHOTS_MAX"]),
            error_pages=int(settings["TRAWL_ERROR_PAGES_MAX"]),
            error_page_bytes=int(settings["TRAWL_ERROR_PAGE_MAX_BYTES"]),
        )


def _pump(
    child: Child, session: CrawlSession, crawl_id: str, scope: CallScope, *, wait: float, bounds: Bounds
) -> dict[str, Any] | None:
    """Move the child's messages into the session for up to `wait` seconds; the `end` message if it came."""
    until = time.monotonic() + wait
    while (left := until - time.monotonic()) > 0:
        if session.items.full():
            return None  # the database is behind: leave the child's messages in its pipe until the tick drained
        message = child.receive(timeout=left)
        kind = message.get("t")
        if kind == "eof":
            return {"crawl_error": f"the package's process {message['error']} during the crawl"}
        if kind == "timeout" or message.get("job") != crawl_id:
            continue  # a late message of an earlier crawl
        if kind == "item":
            session.items.put(message["d"])
            if session.recording is not None and isinstance(message["d"], dict):
                session.recording.add_item(message["d"])
        elif kind == "stats" and isinstance(message.get("d"), dict):
            session.reported_stats = message["d"]
        elif kind == "error":
            session.first_spider_error = message["d"]
        elif kind == "log":
            _relog(message["d"])
        elif kind == "call":
            child.send(**db_call_answer(message, scope))  # what its components ask the database (child_db)
        elif kind == "screenshot":
            _screenshot_keep(session, message, most=bounds.screenshots)
        elif kind == "error_page":
            _error_page_keep(session, message, bounds=bounds)
        elif kind == "recording" and session.recording is not None:
            session.recording.add_part(message)  # checked and bounded there (runtime.replay.record)
        elif kind == "store_wanted":
            session.store_wanted = True
            return None  # tick now: the crawl waits for its items to be stored
        elif kind == "end":
            return message
    return None


def _screenshot_keep(session: CrawlSession, fields: dict[str, Any], *, most: int) -> None:
    """Checked on receipt (the child runs uploaded code), and no more than a job may keep."""
    shot = screenshot_received(fields)
    if shot is None:
        logger.warning("the package's process sent a screenshot that is not one: dropped")
    elif len(session.screenshots) < most:
        session.screenshots.append(shot)


def _error_page_keep(session: CrawlSession, fields: dict[str, Any], *, bounds: Bounds) -> None:
    page = error_page_received(fields, max_bytes=bounds.error_page_bytes)
    if page is None:
        logger.warning("the package's process sent a kept response that is not one: dropped")
    elif len(session.error_pages) < bounds.error_pages:
        session.error_pages.append(page)


def _relog(fields: dict[str, Any]) -> None:
    """A child's log record, handled here as if logged here: this process's job log capture stores it. Only the
    fields a record of the child's LogForwarder has, as the types it sends: the child is not trusted to build this
    process's log records (an `exc_info`, `args` or `stack_info` of its making), nor to name loggers without bound:
    its records are `trawl.package.<its logger's name>`, a bounded set of them (runtime.packaged.channel)."""
    level = fields.get("levelno")
    level = level if type(level) is int else logging.INFO
    created = fields.get("created")
    record = logging.makeLogRecord(
        {
            "name": package_logger_name(fields.get("name")),
            "levelno": level,
            "levelname": logging.getLevelName(level),
            "msg": str(fields.get("msg", "")),
            "args": None,
            "created": created if type(created) in (int, float) else time.time(),
            "exc_text": str(fields.get("exc_text") or "") or None,
        }
    )
    logging.getLogger(record.name).handle(record)
