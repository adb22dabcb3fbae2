"""Scheduling rules as pure functions: no I/O, so they are easy to reason about and test.

Intervals and delays are whole seconds; times are aware datetimes. The services in sources/services/sources.py feed
these rules with a source's row and a job's outcome and store what they answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from crawls.states import ErrorClass, JobStatus

ADAPT_FACTOR = 1.5
BACKOFF_STEPS = (3600, 4 * 3600, 24 * 3600)
# The site could not be reached, refused us or stopped answering (stalled): wait longer each time, not hammer it.
BACKOFF_ERRORS = frozenset(
    {ErrorClass.DNS, ErrorClass.CONNECTION, ErrorClass.BLOCKED, ErrorClass.HTTP_5XX, ErrorClass.STALLED}
)
# Outcomes that say nothing about the site (we stopped, or our worker died): neither a failure nor a change.
NEUTRAL_ERRORS = frozenset({ErrorClass.CANCELLED, ErrorClass.WORKER_LOST})


def clamp(value: int, minimum: int, maximum: int) -> int:
    return min(max(value, minimum), maximum)


def adaptive_interval(*, current: int, minimum: int, maximum: int, changes: int, seen: int, many: float) -> int:
    """The interval after a successful run: ×1.5 when nothing changed, back to `minimum` on many changes, else kept.

    "Many" is at least the fraction `many` of what the run saw (and at least one). Always within minimum..maximum.
    """
    if changes <= 0:
        interval = math.ceil(current * ADAPT_FACTOR)
    elif changes >= max(1, math.ceil(many * seen)):
        interval = minimum
    else:
        interval = current
    return clamp(interval, minimum, maximum)


def backoff_delay(*, failures: int, retry_after: float | None = None, steps: tuple[int, ...] = BACKOFF_STEPS) -> int:
    """Seconds to wait after the `failures`-th failure in a row: 1 h, 4 h, then 24 h. A longer Retry-After wins."""
    step = steps[clamp(failures, 1, len(steps)) - 1]
    return max(step, math.ceil(retry_after or 0))


@dataclass(frozen=True)
class JobOutcome:
    """What a finished job tells the scheduler."""

    status: str
    error_class: str = ""
    changes: int = 0  # items new or changed, plus sources it created
    seen: int = 0  # items it saw, plus links it discovered
    retry_after: float | None = None  # the longest Retry-After the site sent, seconds


def job_outcome(*, status: str, error_class: str, stats: dict[str, Any]) -> JobOutcome:
    changes = stats.get("items_new", 0) + stats.get("items_changed", 0) + stats.get("sources_created", 0)
    seen = stats.get("items", 0) + stats.get("discovered", 0)
    return JobOutcome(status, error_class or "", changes, seen, stats.get("retry_after") or None)


@dataclass(frozen=True)
class Plan:
    """What to store on the source after a job: its interval, failures in a row, and when it runs next."""

    interval: int
    failures: int
    delay: int  # seconds from the end of the job to the next run (before the crawl window is applied)
    reason: str


def plan_next_run(
    *,
    outcome: JobOutcome,
    interval: int,
    minimum: int,
    maximum: int,
    failures: int,
    many: float = 0.25,
    steps: tuple[int, ...] = BACKOFF_STEPS,
    max_retry_after: int = 7 * 86400,
) -> Plan:
    """Adapt on success, back off on network errors and blocks, keep the rhythm otherwise. Retry-After is honoured
    whenever it asks for longer than the rule would wait (up to `max_retry_after`)."""
    retry_after = min(outcome.retry_after or 0, max_retry_after)
    if outcome.status == "succeeded":
        new = adaptive_interval(
            current=interval, minimum=minimum, maximum=maximum, changes=outcome.changes, seen=outcome.seen, many=many
        )
        verdict = "no change" if outcome.changes <= 0 else f"{outcome.changes} change(s) of {outcome.seen}"
        plan = Plan(new, 0, new, f"{verdict}: interval {interval}s → {new}s")
    elif outcome.status in (JobStatus.CANCELLED, JobStatus.DEAD) or outcome.error_class in NEUTRAL_ERRORS:
        plan = Plan(interval, failures, interval, f"{outcome.error_class or outcome.status}: interval kept")
    elif outcome.error_class in BACKOFF_ERRORS:
        delay = backoff_delay(failures=failures + 1, steps=steps)
        plan = Plan(interval, failures + 1, delay, f"{outcome.error_class}, failure {failures + 1} in a row: backoff")
    else:
        # Our spider or scraper failed, not the site: try again on the usual rhythm.
        reason = f"{outcome.error_class or 'failed'}, failure {failures + 1} in a row: interval kept"
        plan = Plan(interval, failures + 1, interval, reason)
    if retry_after > plan.delay:
        return Plan(plan.interval, plan.failures, math.ceil(retry_after), f"{plan.reason}; site's Retry-After")
    return plan


@dataclass(frozen=True)
class Window:
    """Hours a source may start crawling, in its own timezone: [start_hour:00, end_hour:00), across midnight when
    start > end (22 → 6 is the night). start == end means any hour."""

    start_hour: int
    end_hour: int
    timezone: str = "UTC"

    def contains(self, moment: datetime) -> bool:
        hour = moment.astimezone(ZoneInfo(self.timezone)).hour
        if self.start_hour <= self.end_hour:
            return self.start_hour <= hour < self.end_hour or self.start_hour == self.end_hour
        return hour >= self.start_hour or hour < self.end_hour

    def next_open(self, moment: datetime) -> datetime:
        """`moment` if the window allows it, else the first instant after it at which the window opens (UTC).

        Wall-clock hours count: on a spring-forward day an opening hour the clocks skip opens at the end of the gap
        (02:00 → 03:00), and a window the gap swallows whole stays shut that day; on a fall-back day the first
        02:00 opens it.
        """
        if self.contains(moment):
            return moment
        zone = ZoneInfo(self.timezone)
        today = moment.astimezone(zone).date()
        for days in range(4):
            # fold=0: a wall time skipped by DST resolves to the instant the clocks jump to.
            opening = datetime.combine(today + timedelta(days=days), time(self.start_hour), tzinfo=zone).astimezone(UTC)
            if opening > moment and self.contains(opening):
                return opening
        raise ValueError(f"{self} never opens")  # unreachable: some hour of any 4 days is in a non-empty window


def next_run_at(*, finished_at: datetime, delay: int, window: Window | None) -> datetime:
    """The end of the job plus the plan's delay, moved to the next opening of the crawl window if it falls outside."""
    moment = finished_at + timedelta(seconds=delay)
    return window.next_open(moment) if window else moment
