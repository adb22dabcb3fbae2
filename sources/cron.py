"""Cron expressions for sources, as pure functions: a source with `cron` runs at the expression's minutes in its own
time zone (like its crawl window) instead of on an adaptive interval.

Five fields, `minute hour day-of-month month day-of-week`, each parsed by Celery's crontab parser (django-celery-beat's
crontab schedules use it): `*`, `5`, `1-5`, `*/15`, `9-17/2`, lists, month and weekday names (`jan`, `mon-fri`;
weekdays 0-6, Sunday 0). When both day fields are restricted a day matching either runs, as in cron(8). Times are
wall-clock times in the zone: on a spring-forward day a skipped minute runs at the instant the clocks jump to, on a
fall-back day a repeated minute runs once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from celery.schedules import ParseException, crontab_parser

CRON_MAX_CHARS = 100
FIELDS = ("minute", "hour", "day_of_month", "month", "day_of_week")
PARSERS = (crontab_parser(60), crontab_parser(24), crontab_parser(31, 1), crontab_parser(12, 1), crontab_parser(7))
SEARCH_DAYS = 366 * 8  # the rarest expression (29 February on a Monday) recurs within 28 years; most within a day


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday, as cron counts
    any_day: bool  # day of month is `*`
    any_weekday: bool  # day of week is `*`

    def day_matches(self, day) -> bool:
        if day.month not in self.months:
            return False
        in_month, in_week = day.day in self.days, (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week


def cron_parse(expression: str) -> Cron:
    """The expression's sets, or CronError saying which field is wrong and why."""
    if len(expression) > CRON_MAX_CHARS:
        raise CronError(f"at most {CRON_MAX_CHARS} characters")
    fields = expression.split()
    if len(fields) != len(FIELDS):
        raise CronError(
            f"five fields ({' '.join(FIELDS)}), got {len(fields)}: e.g. '*/15 * * * *' or '0 6 * * mon-fri'"
        )
    sets = []
    for name, parser, text in zip(FIELDS, PARSERS, fields, strict=True):
        try:
            values = frozenset(parser.parse(text.lower()))
        except (ParseException, ValueError, KeyError, IndexError) as exc:
            raise CronError(f"{name} {text!r}: {exc or 'not understood'}") from None
        if not values:
            raise CronError(f"{name} {text!r} matches nothing")
        sets.append(values)
    return Cron(*sets, any_day=fields[2] == "*", any_weekday=fields[4] == "*")


def cron_next(expression: str, *, after: datetime, timezone: str = "UTC") -> datetime:
    """The first minute strictly after `after` at which the expression runs, read in `timezone` (UTC, aware)."""
    cron = cron_parse(expression)
    zone = ZoneInfo(timezone)
    local = after.astimezone(zone)
    day = local.date()
    for _ in range(SEARCH_DAYS):
        if cron.day_matches(day):
            for hour in sorted(cron.hours):
                for minute in sorted(cron.minutes):
                    moment = datetime.combine(day, time(hour, minute), tzinfo=zone).astimezone(UTC)
                    if moment > after:
                        return moment
        day += timedelta(days=1)
    raise CronError(f"{expression!r} never runs")
