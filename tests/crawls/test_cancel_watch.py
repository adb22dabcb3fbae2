"""A crawl process's running crawls poll their cancel flags through one CancelWatch: one pipeline for all of them per
CANCEL_POLL_SECONDS, never a stale "no" about a job it has not read yet, and a job gone from the process forgotten."""

from __future__ import annotations

import threading
import uuid

import pytest

from crawls.live import cancel
from crawls.live.cancel import CancelWatch, cancel_request
from project.redis import get_redis

pytestmark = pytest.mark.django_db


class CountingWatch(CancelWatch):
    def __init__(self, every: float) -> None:
        super().__init__(every)
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


def test_the_default_watch_answers_within_its_poll_interval_from_many_threads():
    jobs = _jobs(20)
    watch = CountingWatch(every=cancel.CANCEL_POLL_SECONDS)
    seen: dict[str, bool] = {}
    try:
        cancel_request(job_id=jobs[3])

        def tick(job: str) -> None:
            seen[job] = watch.requested(job)

        threads = [threading.Thread(target=tick, args=(job,)) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == {job: job == jobs[3] for job in jobs}
        assert watch.readings <= len(jobs)
    finally:
        _clear(jobs)


def test_a_job_no_tick_asked_about_for_a_while_is_no_longer_read():
    jobs, watch = _jobs(2), CancelWatch(every=0)
    try:
        watch.requested(jobs[0])
        watch.asked[jobs[0]] -= cancel.WATCH_FORGET_SECONDS + 1  # its crawl ended here
        watch.requested(jobs[1])
        assert set(watch.asked) == {jobs[1]} and watch.read == {jobs[1]}
    finally:
        _clear(jobs)
