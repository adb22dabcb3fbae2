"""Two real `celery beat` processes on one schedule: every periodic task is still sent once per period.

They run the scheduler celeryconfig ships (crawls.beat.LeaderScheduler) against a private Redis, and the test counts
the messages they publish. Once with every period shrunk to 3 s (many periods in a short test), once with the periods
Trawl ships (the migration's rows, untouched).
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import redis

from tests.callbacks.harness import Beat
from tests.e2e.faults_stack import private_redis

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["private_redis"]  # a fixture


def sent(redis_url: str) -> Counter:
    """Periodic task messages waiting in the (unconsumed) control queue, by task name."""
    client = redis.Redis.from_url(redis_url)
    counts: Counter = Counter()
    for key in client.scan_iter("control*"):
        if client.type(key) != b"list":
            continue
        for raw in client.lrange(key, 0, -1):
            counts[json.loads(raw)["headers"]["task"]] += 1
    return counts


def two_beats(private_redis, tmp_path, seconds: float) -> tuple[Counter, list[Beat]]:
    beats = [Beat(log_dir=tmp_path / name, env={"REDIS_URL": private_redis.url}) for name in ("a", "b")]
    for beat in beats:
        beat.log_path.parent.mkdir()
    try:
        for beat in beats:
            beat.start()
        time.sleep(seconds)
        return sent(private_redis.url), beats
    finally:
        for beat in beats:
            beat.stop()


def test_two_beats_send_each_periodic_task_once_per_period(private_redis, tmp_path):
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from project.periodic import PERIODIC_TASKS, periodic_tasks_ensure

    periodic_tasks_ensure()
    every_3s, _ = IntervalSchedule.objects.get_or_create(every=3, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(name__in=PERIODIC_TASKS).update(interval=every_3s, enabled=True)
    seconds = 45

    counts, beats = two_beats(private_redis, tmp_path, seconds)

    logs = "\n".join(beat.log_tail() for beat in beats)
    for task, _ in PERIODIC_TASKS.values():
        # One beat sends about seconds / 3 (+1 at start, minus start-up time); two beats would send about twice that.
        assert seconds / 3 - 6 <= counts[task] <= seconds / 3 + 2, (task, counts, logs)


def test_with_the_shipped_periods_two_beats_still_send_each_task_once_per_period(private_redis, tmp_path, settings):
    from django_celery_beat.models import PeriodicTask

    from project.periodic import PERIODIC_TASKS, periodic_tasks_ensure

    periodic_tasks_ensure()  # the rows the migration creates, with Trawl's default periods
    periods = dict(PeriodicTask.objects.filter(name__in=PERIODIC_TASKS).values_list("task", "interval__every"))
    seconds = 70

    counts, beats = two_beats(private_redis, tmp_path, seconds)

    logs = "\n".join(beat.log_tail() for beat in beats)
    assert counts, logs
    for task, period in periods.items():
        once_each = seconds // period + 1  # at most one per period (plus one at start-up)
        assert counts[task] <= once_each, (task, period, counts, logs)
        if period <= seconds / 2:
            assert counts[task] >= 1, (task, counts, logs)
