"""Cooperative cancel flags in Redis: set by the API, polled by running crawls.

A crawl host runs up to TRAWL_CRAWLS_PER_PROCESS crawls, each ticking twice a second: they poll through one
CancelWatch, which reads the flags of every crawl of the process in one pipeline per CANCEL_POLL_SECONDS instead of
one round trip per crawl per tick.
"""

from __future__ import annotations

import threading
import time

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
    than `every` (or its job not in it yet) reads every watched flag for all, in one pipeline; the others use it."""

    def __init__(self, every: float = CANCEL_POLL_SECONDS) -> None:
        self.every = every
        self.lock = threading.Lock()  # one reading at a time: the ticks that wait for it use its answer
        self.asked: dict[str, float] = {}  # job id → when a tick last asked (jobs asked about within the reading)
        self.read: set[str] = set()  # jobs the last reading covered
        self.flagged: set[str] = set()  # of those, the ones with their flag set
        self.read_at = float("-inf")

    def requested(self, job_id: object) -> bool:
        job, now = str(job_id), time.monotonic()
        with self.lock:
            self.asked[job] = now
            if job not in self.read or now - self.read_at >= self.every:
                self._read(now)
            return job in self.flagged

    def _read(self, now: float) -> None:
        for job in [job for job, asked in self.asked.items() if now - asked > WATCH_FORGET_SECONDS]:
            del self.asked[job]
        jobs = list(self.asked)
        pipe = get_redis().pipeline(transaction=False)
        for job in jobs:
            pipe.exists(_key(job))
        flags = pipe.execute()  # a RedisError goes to the tick that read: it asks again next tick
        self.flagged = {job for job, flag in zip(jobs, flags, strict=True) if flag}
        self.read, self.read_at = set(jobs), now


_watch = CancelWatch()


def cancel_requested_watched(*, job_id: object) -> bool:
    """`cancel_requested` for a running crawl's ticks: at most CANCEL_POLL_SECONDS old, read with every other crawl
    of this process."""
    return _watch.requested(job_id)


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
