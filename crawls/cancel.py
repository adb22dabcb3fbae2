"""Cooperative cancel flags in Redis: set by the API, polled by running crawls."""

from __future__ import annotations

from project.redis import get_redis

FLAG_TTL_SECONDS = 7 * 86400


def _key(job_id: object) -> str:
    return f"trawl:cancel:job:{job_id}"


def cancel_request(*, job_id: object) -> None:
    get_redis().set(_key(job_id), "1", ex=FLAG_TTL_SECONDS)


def cancel_requested(*, job_id: object) -> bool:
    return bool(get_redis().exists(_key(job_id)))
