"""The scheduling rules with fixed clocks: priority steps, adaptive interval, backoff, crawl windows (DST too)."""

from __future__ import annotations

import itertools
import random
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from kombu import Connection, Exchange, Queue

import celeryconfig
from project.messaging.brokers import PRIORITY_STEPS
from project.messaging.messages import broker_priority
from sources.scheduling import (
    JobOutcome,
    Window,
    adaptive_interval,
    backoff_delay,
    job_outcome,
    next_run_at,
    plan_next_run,
)


def test_most_urgent_job_gets_the_most_urgent_broker_step():
    assert broker_priority(100) == 0


def test_least_urgent_job_gets_the_least_urgent_broker_step():
    assert broker_priority(1) == PRIORITY_STEPS - 1 == 9


def test_default_priority_lands_on_the_default_broker_step():
    assert broker_priority(50) == celeryconfig.task_default_priority


def test_higher_priority_never_maps_to_a_less_urgent_step():
    steps = [broker_priority(p) for p in range(1, 101)]

    assert all(later <= earlier for earlier, later in itertools.pairwise(steps))
    assert set(steps) == set(range(PRIORITY_STEPS)), "every broker step should be reachable"


@pytest.mark.parametrize(("priority", "step"), [(0, 9), (-20, 9), (101, 0), (10_000, 0)])
def test_out_of_range_priorities_are_clamped(priority, step):
    assert broker_priority(priority) == step


def test_steps_match_the_broker_configuration():
    assert celeryconfig.broker_transport_options["priority_steps"] == list(range(PRIORITY_STEPS))


def test_urgent_message_overtakes_a_queued_backlog_on_redis(redis_server):
    name = f"test-priority-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    with Connection(settings.REDIS_URL, transport_options=celeryconfig.broker_transport_options) as conn:
        bound = queue(conn.default_channel)
        bound.declare()
        try:
            producer = conn.Producer(serializer="json")
            for n in range(5):
                producer.publish({"job": f"backlog-{n}"}, exchange=bound.exchange, routing_key=name, priority=9)
            producer.publish({"job": "urgent"}, exchange=bound.exchange, routing_key=name, priority=broker_priority(95))

            first = bound.get(no_ack=True)

            assert first.payload == {"job": "urgent"}
        finally:
            bound.purge()
            bound.delete()


# --- Adaptive interval -------------------------------------------------------------------------------

ADAPT = {"minimum": 600, "maximum": 86400, "many": 0.25}


def test_unchanged_run_stretches_the_interval_by_half():
    assert adaptive_interval(current=3600, changes=0, seen=40, **ADAPT) == 5400


def test_stretching_stops_at_the_maximum():
    assert adaptive_interval(current=80_000, changes=0, seen=40, **ADAPT) == 86400


def test_many_changes_bring_the_interval_back_to_the_minimum():
    assert adaptive_interval(current=43_200, changes=10, seen=40, **ADAPT) == 600


def test_a_few_changes_keep_the_interval():
    assert adaptive_interval(current=7200, changes=3, seen=40, **ADAPT) == 7200


def test_a_changed_single_product_is_many_changes():
    assert adaptive_interval(current=7200, changes=1, seen=1, **ADAPT) == 600


def test_an_interval_outside_its_bounds_is_brought_back_within_them():
    assert adaptive_interval(current=100, changes=3, seen=40, **ADAPT) == 600
    assert adaptive_interval(current=999_999, changes=3, seen=40, **ADAPT) == 86400


# --- Backoff -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("failures", "delay"), [(1, 3600), (2, 4 * 3600), (3, 24 * 3600), (7, 24 * 3600)])
def test_backoff_grows_one_hour_four_hours_then_a_day(failures, delay):
    assert backoff_delay(failures=failures) == delay


def test_retry_after_wins_only_when_it_asks_for_longer():
    assert backoff_delay(failures=1, retry_after=7200) == 7200
    assert backoff_delay(failures=2, retry_after=60) == 4 * 3600


# --- Plan after a job --------------------------------------------------------------------------------

SOURCE = {"interval": 3600, "minimum": 600, "maximum": 86400}


def test_success_adapts_and_resets_failures():
    plan = plan_next_run(outcome=JobOutcome("succeeded", changes=0, seen=12), failures=2, **SOURCE)

    assert (plan.interval, plan.failures, plan.delay) == (5400, 0, 5400)
    assert "no change" in plan.reason


@pytest.mark.parametrize("error_class", ["dns", "connection", "blocked", "http_5xx"])
def test_network_errors_and_blocks_back_off_and_keep_the_interval(error_class):
    first = plan_next_run(outcome=JobOutcome("failed", error_class), failures=0, **SOURCE)
    third = plan_next_run(outcome=JobOutcome("failed", error_class), failures=2, **SOURCE)

    assert (first.interval, first.failures, first.delay) == (3600, 1, 3600)
    assert (third.failures, third.delay) == (3, 24 * 3600)


def test_retry_after_longer_than_the_backoff_is_honoured():
    plan = plan_next_run(outcome=JobOutcome("failed", "blocked", retry_after=10_800), failures=0, **SOURCE)

    assert plan.delay == 10_800
    assert "Retry-After" in plan.reason


def test_retry_after_is_honoured_after_a_success_too_but_capped():
    slow = plan_next_run(outcome=JobOutcome("succeeded", changes=5, seen=5, retry_after=9000), failures=0, **SOURCE)
    absurd = plan_next_run(
        outcome=JobOutcome("failed", "blocked", retry_after=10**9), failures=0, max_retry_after=86400 * 7, **SOURCE
    )

    assert (slow.interval, slow.delay) == (600, 9000)
    assert absurd.delay == 86400 * 7


def test_our_own_failures_count_but_keep_the_usual_rhythm():
    plan = plan_next_run(outcome=JobOutcome("failed", "spider_error"), failures=1, **SOURCE)

    assert (plan.interval, plan.failures, plan.delay) == (3600, 2, 3600)


@pytest.mark.parametrize(("status", "error_class"), [("cancelled", "cancelled"), ("dead", "worker_lost")])
def test_cancelled_or_lost_jobs_change_nothing(status, error_class):
    plan = plan_next_run(outcome=JobOutcome(status, error_class), failures=1, **SOURCE)

    assert (plan.interval, plan.failures, plan.delay) == (3600, 1, 3600)


def test_job_outcome_counts_new_sources_as_changes_and_links_as_seen():
    stats = {"items": 10, "items_new": 1, "items_changed": 2, "discovered": 4, "sources_created": 3, "retry_after": 30}

    assert job_outcome(status="succeeded", error_class="", stats=stats) == JobOutcome("succeeded", "", 6, 14, 30)


# --- Crawl windows -----------------------------------------------------------------------------------


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def local(zone: str, *args, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(zone), fold=fold)


def test_inside_the_window_runs_now():
    assert Window(9, 17).next_open(utc(2026, 6, 1, 12, 30)) == utc(2026, 6, 1, 12, 30)


def test_before_the_window_waits_for_it_the_same_day_and_after_it_the_next():
    assert Window(9, 17).next_open(utc(2026, 6, 1, 8, 59)) == utc(2026, 6, 1, 9)
    assert Window(9, 17).next_open(utc(2026, 6, 1, 17)) == utc(2026, 6, 2, 9)


def test_window_hours_are_read_in_the_sources_timezone():
    paris = Window(9, 17, "Europe/Paris")  # UTC+2 in June

    assert paris.next_open(utc(2026, 6, 1, 6)) == utc(2026, 6, 1, 7)
    assert paris.contains(utc(2026, 6, 1, 14, 59))
    assert not paris.contains(utc(2026, 6, 1, 15))


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (local("Europe/Paris", 2026, 6, 1, 23, 30), local("Europe/Paris", 2026, 6, 1, 23, 30)),  # before midnight
        (local("Europe/Paris", 2026, 6, 2, 3, 0), local("Europe/Paris", 2026, 6, 2, 3, 0)),  # after midnight
        (local("Europe/Paris", 2026, 6, 2, 6, 0), local("Europe/Paris", 2026, 6, 2, 22, 0)),  # end is exclusive
        (local("Europe/Paris", 2026, 6, 2, 12, 0), local("Europe/Paris", 2026, 6, 2, 22, 0)),
        (local("Europe/Paris", 2026, 6, 2, 21, 59), local("Europe/Paris", 2026, 6, 2, 22, 0)),
    ],
)
def test_a_window_across_midnight(moment, expected):
    assert Window(22, 6, "Europe/Paris").next_open(moment) == expected


def test_spring_forward_an_opening_hour_the_clocks_skip_opens_when_they_land():
    # Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC); 02:00 local never happens.
    night = Window(2, 5, "Europe/Berlin")

    opens = night.next_open(local("Europe/Berlin", 2026, 3, 29, 1, 30))

    assert opens == utc(2026, 3, 29, 1) == local("Europe/Berlin", 2026, 3, 29, 3, 0)


def test_spring_forward_a_window_inside_the_gap_stays_shut_that_day():
    gap = Window(2, 3, "Europe/Berlin")

    assert gap.next_open(utc(2026, 3, 28, 23)) == local("Europe/Berlin", 2026, 3, 30, 2) == utc(2026, 3, 30, 0)


def test_fall_back_the_first_of_the_repeated_hours_opens_the_window():
    # Berlin, 2026-10-25: 03:00 CEST falls back to 02:00 CET (01:00 UTC); 02:xx local happens twice.
    window = Window(2, 4, "Europe/Berlin")

    assert window.next_open(utc(2026, 10, 24, 23, 30)) == utc(2026, 10, 25, 0)  # 02:00 CEST, the first one
    assert window.contains(utc(2026, 10, 25, 1, 30))  # 02:30 CET, the second one, is inside too
    assert Window(3, 5, "Europe/Berlin").next_open(utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 25, 2)  # 03:00 CET


def test_a_night_window_across_midnight_on_a_dst_day():
    # New York, 2026-03-08: clocks jump 02:00 EST → 03:00 EDT inside a 22 → 6 window.
    night = Window(22, 6, "America/New_York")

    assert night.contains(local("America/New_York", 2026, 3, 8, 3, 30))
    assert night.next_open(local("America/New_York", 2026, 3, 8, 8, 0)) == utc(2026, 3, 9, 2)  # 22:00 EDT


def test_equal_hours_mean_any_time():
    assert Window(5, 5).next_open(utc(2026, 1, 1, 12)) == utc(2026, 1, 1, 12)


def quarter_hours(after: datetime, before: datetime):
    probe = after.replace(second=0, microsecond=0) + timedelta(minutes=15 - after.minute % 15)
    while probe < before:
        yield probe
        probe += timedelta(minutes=15)


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"])
def test_next_open_is_the_earliest_allowed_moment(zone):
    """Over a year of random moments: the answer is inside the window, not before the moment, and no earlier
    quarter hour in between is inside (Lord Howe's DST shifts by 30 min, Kolkata is UTC+5:30)."""
    rng = random.Random(zone)
    for _ in range(300):
        start, end = rng.sample(range(24), 2)
        window = Window(start, end, zone)
        moment = utc(2026, 1, 1) + timedelta(minutes=rng.randrange(365 * 24 * 60))

        opens = window.next_open(moment)

        assert opens >= moment and window.contains(opens)
        assert not any(window.contains(t) for t in quarter_hours(moment, opens)), (window, moment, opens)


def test_next_run_moves_into_the_window():
    finished = utc(2026, 6, 1, 10)

    assert next_run_at(finished_at=finished, delay=3600, window=None) == utc(2026, 6, 1, 11)
    assert next_run_at(finished_at=finished, delay=3600, window=Window(22, 6)) == utc(2026, 6, 1, 22)
