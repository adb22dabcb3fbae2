"""A source's crawl window: its own, else its scraper's. Dispatching books a source's job only inside it, and a job's
end plans the next run at its next opening (sources.services.dispatch and feedback)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError

from sources.cron import cron_next
from sources.models import Source, validate_timezone
from sources.scheduling import Window

logger = logging.getLogger("trawl.scheduling")


def source_window(source: Source) -> Window | None:
    """The source's crawl window, else its scraper's (`TRAWL_CRAWL_WINDOW` in the scraper's settings), else none."""
    start, end, zone = source.window_start_hour, source.window_end_hour, source.timezone
    if start is None or end is None:
        spec = (source.scraper.settings or {}).get("TRAWL_CRAWL_WINDOW") or {}
        start, end, zone = spec.get("start_hour"), spec.get("end_hour"), spec.get("timezone") or "UTC"
    if start is None or end is None:
        return None
    try:
        validate_timezone(zone)
    except ValidationError:
        logger.warning("source %s: unknown timezone %r, its crawl window is read in UTC", source.pk, zone)
        zone = "UTC"
    return Window(int(start), int(end), zone)


CRON_WINDOW_STEPS = 500  # openings tried before a cron whose minutes miss the window runs at its own next minute


def source_cron_next(source: Source, *, after: datetime) -> datetime | None:
    """A cron source's next minute after `after` (in its timezone) that falls inside its crawl window, if it has one;
    None for a source on an adaptive interval."""
    if not source.cron:
        return None
    moment = cron_next(source.cron, after=after, timezone=source.timezone)
    window = source_window(source)
    for _ in range(CRON_WINDOW_STEPS):
        if window is None or window.contains(moment):
            return moment
        moment = cron_next(source.cron, after=window.next_open(moment) - timedelta(seconds=1), timezone=source.timezone)
    logger.warning("source %s: cron %r never falls inside its crawl window", source.pk, source.cron)
    return cron_next(source.cron, after=after, timezone=source.timezone)
