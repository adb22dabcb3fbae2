"""A running job's live numbers in Redis, every second while someone watches: what `manage.py crawl --wait` shows
between heartbeats.

The heartbeat writes the same numbers to the job row every TRAWL_HEARTBEAT_SECONDS. Each reading marks the job
watched for a while; its crawl's ticks see the mark (crawls.live.cancel.CancelWatch reads it with the cancel flags)
and record their numbers every second only then. Summing them (every shard's, every attempt's) is a good part of a
crawl's own CPU, and a crawl process runs many crawls nobody watches.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import redis

from project.redis import get_redis, hash_tag, redis_key

PROGRESS_SECONDS = 1.0
# Written every second while watched: gone soon after, so a watcher coming back later never reads old numbers.
PROGRESS_TTL_SECONDS = 5
WATCHED_SECONDS = 10.0  # how long one reading marks the job watched (longer for a slower watcher)


def _key(job_id: object) -> str:
    return redis_key("progress", "job", hash_tag(job_id))


def watched_key(job_id: object) -> str:
    return redis_key("progress", "watched", hash_tag(job_id))


def progress_store(*, job_id: object, stats: dict[str, Any]) -> None:
    # Progress is a courtesy: with Redis away the heartbeat still records the numbers.
    with contextlib.suppress(redis.RedisError):
        get_redis().set(_key(job_id), json.dumps(stats, default=str), ex=PROGRESS_TTL_SECONDS)


def progress_read(*, job_id: object, every: float = PROGRESS_SECONDS) -> dict[str, Any] | None:
    """The job's live numbers (None: none recorded yet), and the job marked watched by a reader back in `every` s."""
    watched_for = max(WATCHED_SECONDS, 3 * every)
    try:
        pipe = get_redis().pipeline(transaction=False)
        _, raw = pipe.set(watched_key(job_id), "1", ex=max(1, int(watched_for))).get(_key(job_id)).execute()
    except redis.RedisError:
        return None
    return json.loads(raw) if raw else None
