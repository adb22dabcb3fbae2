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
from typing import Any

from project.redis import REDIS_SETTING
from runtime.bridge.runner import STOP_GRACE_SECONDS, CrawlResult, CrawlSession
from runtime.packaged.child_db import CallScope, db_call_answer
from runtime.packaged.child_redis import child_redis_keys
from runtime.packaged.children import Child, ChildPool, Unused, child_discard, child_for
from runtime.rendering.screenshots import screenshot_received
from runtime.settings.project import ProjectLayer
from runtime.spec import CrawlSpec, PackageSpec

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
    child.send(cmd="crawl", job=crawl_id, spider=spider, settings=settings, kwargs=spider_kwargs, project=layer)
    deadline = time.monotonic() + timeout
    screenshots_max = int(settings["TRAWL_RENDER_SCREENSHOTS_MAX"])
    stopped_because, stop_deadline, end = "", None, None
    try:
        while end is None:
            end = _pump(child, session, crawl_id, scope, wait=tick_seconds, screenshots_max=screenshots_max)
            if end is not None:
                break
            wake, session.store_wanted = session.store_wanted, False
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
    child.last_used = time.monotonic()
    stats = end.get("stats") if end.get("stats") is not None else dict(session.reported_stats)
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


def _pump(
    child: Child, session: CrawlSession, crawl_id: str, scope: CallScope, *, wait: float, screenshots_max: int
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
        elif kind == "stats":
            session.reported_stats = message["d"]
        elif kind == "error":
            session.first_spider_error = message["d"]
        elif kind == "log":
            _relog(message["d"])
        elif kind == "call":
            child.send(**db_call_answer(message, scope))  # what its components ask the database (child_db)
        elif kind == "screenshot":
            _screenshot_keep(session, message, most=screenshots_max)
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


def _relog(fields: dict[str, Any]) -> None:
    """A child's log record, handled here as if logged here: this process's job log capture stores it. Only the
    fields a record of the child's LogForwarder has, as the types it sends: the child is not trusted to build this
    process's log records (an `exc_info`, `args` or `stack_info` of its making)."""
    level = fields.get("levelno")
    level = level if type(level) is int else logging.INFO
    created = fields.get("created")
    record = logging.makeLogRecord(
        {
            "name": str(fields.get("name") or "package"),
            "levelno": level,
            "levelname": logging.getLevelName(level),
            "msg": str(fields.get("msg", "")),
            "args": None,
            "created": created if type(created) in (int, float) else time.time(),
            "exc_text": str(fields.get("exc_text") or "") or None,
        }
    )
    logging.getLogger(record.name).handle(record)
