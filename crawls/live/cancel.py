"""Cooperative cancel flags in Redis: set by the API, polled by running crawls."""

from __future__ import annotations

from project.redis import get_redis, hash_tag, redis_key

FLAG_TTL_SECONDS = 7 * 86400


def _key(job_id: object) -> str:
    return redis_key("cancel", "job", hash_tag(job_id))


def cancel_request(*, job_id: object) -> None:
    get_redis().set(_key(job_id), "1", ex=FLAG_TTL_SECONDS)


def cancel_requested(*, job_id: object) -> bool:
    return bool(get_redis().exists(_key(job_id)))


def _batch_key(batch_id: object) -> str:
    return redis_key("cancel", "batch", batch_id)


def cancel_request_batch(*, batch_id: object, job_ids: list) -> None:
    """Flag the batch and each of its jobs in one round trip; every job polls its own flag."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.set(_batch_key(batch_id), "1", ex=FLAG_TTL_SECONDS)
    for job_id in job_ids:
        pipe.set(_key(job_id), "1", ex=FLAG_TTL_SECONDS)
    pipe.execute()


def cancel_requested_batch(*, batch_id: object) -> bool:
    return bool(get_redis().exists(_batch_key(batch_id)))
