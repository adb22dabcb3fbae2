"""A running attempt's liveness beat in Redis: the thread that keeps a crawl alive in the reaper's eyes writes here,
not to PostgreSQL, so a crawl process holds no database connection of its own for it (one per crawl process, the
task's, and only while it works: docs/deploy.md's connection budget).

The job row still gets `heartbeat_at` with the crawl's numbers on each tick (every TRAWL_HEARTBEAT_SECONDS): the
reaper calls a job stale only when both are old, so a Redis emptied under running crawls requeues none of them, and
a slow tick (a long upsert, a big final flush) is covered by this beat.
"""

from __future__ import annotations

from django.conf import settings

from project.redis import get_redis, hash_tag, mget_across_slots, redis_key


def _key(job_id: object, attempt: int) -> str:
    return redis_key("beat", "job", hash_tag(job_id), attempt)


def beat_write(*, job_id: object, attempt: int) -> None:
    """This attempt is alive now; forgotten after TRAWL_REAPER_STALE_SECONDS without another beat."""
    get_redis().set(_key(job_id, attempt), "1", ex=max(1, int(settings.TRAWL_REAPER_STALE_SECONDS)))


def beats_alive(attempts: list[tuple[object, int]]) -> set[str]:
    """Ids (as strings) of the jobs among `(job id, attempt)` whose attempt has beaten recently."""
    if not attempts:
        return set()
    values = mget_across_slots(get_redis(), [_key(job_id, attempt) for job_id, attempt in attempts])
    return {str(job_id) for (job_id, _), value in zip(attempts, values, strict=True) if value}


def beat_age(*, job_id: object, attempt: int) -> float | None:
    """Seconds since this attempt last beat (None when it has not beaten within TRAWL_REAPER_STALE_SECONDS): the
    key's remaining time to live tells, with no clock of the worker's to trust."""
    left_ms = get_redis().pttl(_key(job_id, attempt))
    if left_ms is None or left_ms < 0:
        return None
    return max(0.0, max(1, int(settings.TRAWL_REAPER_STALE_SECONDS)) - left_ms / 1000)
