"""Cooperative cancel flags in Redis: set by the API, polled by running crawls.

A crawl host runs up to TRAWL_CRAWLS_PER_PROCESS crawls, each ticking twice a second: they poll through one
CancelWatch, which reads the flags of every crawl of the process in one pipeline per CANCEL_POLL_SECONDS instead of
one round trip per crawl per tick. The same reading tells which of them someone watches (crawls.live.progress).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from crawls.live.progress import watched_key
from project.redis import get_redis, hash_tag, redis_key

FLAG_TTL_SECONDS = 7 * 86400
CANCEL_POLL_SECONDS = 0.5  # how old a reading may be: a cancel still lands within about a second
WATCH_FORGET_SECONDS = 10.0  # a job nobody asked about for this long has ended here: no longer read


def _key(job_id: object) -> str:
    return redis_key("cancel", "job", hash_tag(job_id))


def cancel_request(*, job_id: object) -> None:
    get_redis().set(_key(job_id), "1", ex=FLAG_TTL_SECONDS)


def cancel_requested(*, job_id: object) -> bool:
    return bool(get_redis().exists(_key(job_id)))


class CancelWatch:
    """The cancel flags of the jobs this process runs, read together. The first tick to find the last reading older
    than `every` (or its job not in it yet) reads every watched flag, in one pipeline; a tick that comes while it reads
    does not wait for it (its answer is the last reading's; its next tick has the new one), and after a failed reading
    no tick tries again for `every` seconds: with Redis away, one tick of the process waits for it, not each in turn.
    Each reading also tells which jobs someone follows the progress of (`followed`)."""

    def __init__(self, every: float = CANCEL_POLL_SECONDS, client: Callable[[], Any] = get_redis) -> None:
        self.every, self.client = every, client
        self.reading = threading.Lock()  # held by the one tick that reads
        self.asking = threading.Lock()  # around `asked`, which every tick writes and the reading tick prunes
        self.asked: dict[str, float] = {}  # job id → when a tick last asked (the jobs the next reading covers)
        self.read: frozenset[str] = frozenset()  # jobs the last reading covered
        self.flagged: frozenset[str] = frozenset()  # of those, the ones with their flag set
        self.followed: frozenset[str] = frozenset()  # and the ones whose progress someone reads
        self.read_at = self.failed_at = float("-inf")

    def requested(self, job_id: object) -> bool:
        job = str(job_id)
        with self.asking:
            self.asked[job] = time.monotonic()
        if self._answered(job) or not self.reading.acquire(blocking=False):
            return job in self.flagged
        try:
            now = time.monotonic()
            if now - self.failed_at < self.every:
                raise redis.RedisError("the cancel flags could not be read a moment ago; asking again shortly")
            if not self._answered(job):  # another tick may have read while this one came
                self._read(now)
        finally:
            self.reading.release()
        return job in self.flagged

    def _answered(self, job: str) -> bool:
        return job in self.read and time.monotonic() - self.read_at < self.every

    def _read(self, now: float) -> None:
        with self.asking:
            for job in [job for job, asked in self.asked.items() if now - asked > WATCH_FORGET_SECONDS]:
                del self.asked[job]
            jobs = list(self.asked)
        pipe = self.client().pipeline(transaction=False)
        for job in jobs:
            pipe.exists(_key(job))
            pipe.exists(watched_key(job))
        try:
            flags = pipe.execute()
        except redis.RedisError:  # to the tick that read: it logs and asks again; the others wait `every`
            self.failed_at = now
            raise
        self.flagged = frozenset(job for job, flag in zip(jobs, flags[::2], strict=True) if flag)
        self.followed = frozenset(job for job, flag in zip(jobs, flags[1::2], strict=True) if flag)
        self.read, self.read_at = frozenset(jobs), now


_watch = CancelWatch()


def cancel_requested_watched(*, job_id: object) -> bool:
    """`cancel_requested` for a running crawl's ticks: at most CANCEL_POLL_SECONDS old, read with every other crawl
    of this process."""
    return _watch.requested(job_id)


def progress_watched(*, job_id: object) -> bool:
    """Whether someone read the job's progress lately, as of this process's last reading of its crawls' flags (a tick
    asks `cancel_requested_watched` first)."""
    return str(job_id) in _watch.followed


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
