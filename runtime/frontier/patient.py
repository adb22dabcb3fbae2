"""A frontier commit that waits Redis out, as everything in a crawl does (runtime.frontier.scheduler)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import redis

from runtime.frontier import Committed, Frontier

logger = logging.getLogger("trawl.frontier")

COMMIT_RETRY_MAX_PAUSE = 2.0  # seconds between tries of a commit while Redis is away (TRAWL_INFRA_PATIENCE_SECONDS)


async def commit_patiently(
    frontier: Frontier, client: Any, *, stats: Any, patience: float, **batch: Any
) -> Committed | None:
    """`frontier.commit_async(client, **batch)`, tried again while Redis is away for `patience` seconds (the
    crawl goes on meanwhile, the requests done still held); None once it gave up: the crawl must stop. Every try
    carries the same token: a try that Redis applied but whose reply was lost is not applied again by the next."""
    batch.setdefault("token", uuid.uuid4().bytes)
    give_up, pause = time.monotonic() + patience, 0.2
    while True:
        try:
            return await frontier.commit_async(client, **batch)
        except redis.RedisError as exc:
            if time.monotonic() >= give_up:
                # The job is requeued as an infrastructure fault (crawls.services.execution) and resumes from the
                # frontier, where the request that found these is still in flight: nothing is lost.
                logger.error("frontier: Redis unreachable (%s); stopping the crawl", exc)
                stats.inc_value("trawl/infrastructure_errors")
                return None
            logger.warning("frontier: Redis unreachable (%s); trying again in %.1f s", exc, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, COMMIT_RETRY_MAX_PAUSE)
