"""A crawl process's running crawls poll their cancel flags through one CancelWatch: one pipeline for all of them per
CANCEL_POLL_SECONDS, a job it has not read yet read at its first ask, no tick queueing behind another's reading (nor
retrying one that just failed), and a job gone from the process forgotten."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from crawls.live import cancel
from crawls.live.cancel import CancelWatch, cancel_request
from project.redis import get_redis

pytestmark = pytest.mark.django_db


class CountingWatch(CancelWatch):
    def __init__(self, every: float, **kwargs) -> None:
        super().__init__(every, **kwargs)
        self.readings = 0

    def _read(self, now: float) -> None:
        self.readings += 1
        super()._read(now)


def _jobs(count: int) -> list[str]:
    return [f"watch-{uuid.uuid4().hex}" for _ in range(count)]


def _clear(jobs: list[str]) -> None:
    get_redis().delete(*[cancel._key(job) for job in jobs])


def test_fifty_crawls_ticking_read_their_flags_in_one_pipeline_and_see_a_cancel_at_the_next_reading():
    jobs, watch = _jobs(50), CountingWatch(every=3600)
    try:
        assert not any(watch.requested(job) for job in jobs)
        first = watch.readings
        assert first == 50, "each job not read yet is read at its first ask (never a stale no)"
        for _ in range(3):  # every crawl ticks again: all of them answered by the reading they share
            assert not any(watch.requested(job) for job in jobs)
        assert watch.readings == first, "ticks within a reading's age ask Redis nothing"
        cancel_request(job_id=jobs[7])
        watch.read_at -= 3600  # the reading is now as old as `every`
        answers = [watch.requested(job) for job in jobs]
        assert watch.readings == first + 1, "one pipeline for every crawl of the process"
        assert answers == [job == jobs[7] for job in jobs]
    finally:
        _clear(jobs)


def test_a_cancel_is_seen_once_the_reading_is_as_old_as_the_poll_interval():
    jobs, watch = _jobs(3), CountingWatch(every=0.2)
    try:
        assert not any(watch.requested(job) for job in jobs)
        cancel_request(job_id=jobs[1])
        assert not watch.requested(jobs[1]) or watch.readings == 2, "within the interval: the reading it has"
        time.sleep(0.2)
        assert [watch.requested(job) for job in jobs] == [False, True, False]
    finally:
        _clear(jobs)


def test_ticks_that_come_while_another_reads_do_not_wait_for_it():
    """A Redis that takes the connection and never answers: the tick that reads waits for its socket timeout; the
    ticks of the other crawls answer from the last reading meanwhile instead of queueing behind it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(100)
        port = silent.getsockname()[1]
        # A socket timeout long enough for the ten ticks' threads to start and answer within it on a loaded machine.
        client = redis.Redis(port=port, socket_timeout=5, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
        jobs, watch = _jobs(11), CountingWatch(every=3600, client=lambda: client)
        failed = []

        def read() -> None:
            try:
                watch.requested(jobs[0])
            except redis.RedisError as exc:
                failed.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        while not watch.reading.locked():
            time.sleep(0.01)
        answers = []

        def tick(job: str) -> None:
            answers.append((watch.requested(job), watch.reading.locked()))

        others = [threading.Thread(target=tick, args=(job,)) for job in jobs[1:]]
        for thread in others:
            thread.start()
        for thread in others:
            thread.join()
        reader.join()
    assert answers == [(False, True)] * 10, "answered while the reading was still under way"
    assert len(failed) == 1 and watch.readings == 1


def test_after_a_failed_reading_no_tick_tries_again_within_the_interval():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there
    client = redis.Redis(port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    jobs, watch = _jobs(5), CountingWatch(every=3600, client=lambda: client)
    for job in jobs:
        with pytest.raises(redis.RedisError):
            watch.requested(job)
    assert watch.readings == 1, "one connection refused, not one per crawl's tick"


def test_a_job_no_tick_asked_about_for_a_while_is_no_longer_read():
    jobs, watch = _jobs(2), CancelWatch(every=0)
    try:
        watch.requested(jobs[0])
        watch.asked[jobs[0]] -= cancel.WATCH_FORGET_SECONDS + 1  # its crawl ended here
        watch.requested(jobs[1])
        assert set(watch.asked) == {jobs[1]} and watch.read == {jobs[1]}
    finally:
        _clear(jobs)
