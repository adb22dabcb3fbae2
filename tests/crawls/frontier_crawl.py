"""A crawl on a job's frontier without the job machinery: its Scrapy settings and a tick storing its items."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crawls.frontier import Frontier
from crawls.services.shards import frontier_settings


def frontier_crawl_settings(job: str) -> dict[str, Any]:
    return {"TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR", **frontier_settings(job_id=job, attempt=1, shard=0)}


def storing_tick(frontier: Frontier, into: list | None = None) -> Callable[[Any], str]:
    """What JobTracker does every tick: store the drained items (here: into `into`, or nowhere), then tell the
    frontier."""

    def tick(session: Any) -> str:
        if batch := session.drain(100):
            if into is not None:
                into.extend(batch)
            frontier.stored(len(batch))
        return ""

    return tick
