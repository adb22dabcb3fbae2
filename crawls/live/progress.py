"""A running job's live numbers in Redis, every second: what `manage.py crawl --wait` shows between heartbeats.

The heartbeat writes the same numbers to the job row every TRAWL_HEARTBEAT_SECONDS; this key is fresher and cheap
(one SET a second per running job, gone a minute after the job stops writing it).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import redis

from project.redis import get_redis, hash_tag, redis_key

PROGRESS_SECONDS = 1.0
PROGRESS_TTL_SECONDS = 60


def _key(job_id: object) -> str:
    return redis_key("progress", "job", hash_tag(job_id))


def progress_store(*, job_id: object, stats: dict[str, Any]) -> None:
    # Progress is a courtesy: with Redis away the heartbeat still records the numbers.
    with contextlib.suppress(redis.RedisError):
        get_redis().set(_key(job_id), json.dumps(stats, default=str), ex=PROGRESS_TTL_SECONDS)


def progress_read(*, job_id: object) -> dict[str, Any] | None:
    try:
        raw = get_redis().get(_key(job_id))
    except redis.RedisError:
        return None
    return json.loads(raw) if raw else None
