"""Sources: saving them, crawling one now, and learning from their jobs. Dispatching is in dispatch.py.

The rules themselves (adaptive interval, backoff, crawl windows) are pure functions in sources/scheduling.py.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from access.models import Requester
from crawls.models import ACTIVE_STATUSES, CrawlJob
from crawls.services.jobs import job_create
from crawls.services.validation import input_bounds, job_args_validate, validate_crawl_url
from project.errors import TrawlError
from project.validators import priority_check
from registry.models import Scraper
from runtime.inputs.checks import config_check
from runtime.inputs.patterns import PatternError
from sources.cron import CronError, cron_next, cron_parse
from sources.models import Source, SourceKind, SourceStrategy, validate_timezone
from sources.scheduling import clamp
from sources.services.dispatch import DISPATCH_LEASE, sources_dispatch_due  # noqa: F401 (re-exported)

logger = logging.getLogger("trawl.scheduling")

SITEMAP_SCRAPER = "sitemap"
# What the API and admin may set; the rest is the scheduler's to keep.
EDITABLE = (
    "url",
    "kind",
    "strategy",
    "priority",
    "refresh_interval",
    "min_interval",
    "max_interval",
    "config",
    "args",
    "enabled",
    "window_start_hour",
    "window_end_hour",
    "timezone",
    "cron",
    "next_sync_at",
)


def _default(name: str) -> Any:
    return Source._meta.get_field(name).default


def _scraper(name: str) -> Scraper:
    scraper = Scraper.objects.filter(name=name).first()
    if scraper is None:
        raise TrawlError(f"no scraper named {name!r}", field="scraper")
    return scraper


def _editable(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(EDITABLE))
    if unknown:
        raise TrawlError(f"these source fields cannot be set: {', '.join(unknown)}", field=unknown[0])


def source_check(source: Source) -> None:
    """Raise TrawlError naming the field if the source cannot be scheduled as it stands."""
    validate_crawl_url(source.url)
    if source.kind not in SourceKind.values:
        raise TrawlError(f"kind must be one of {', '.join(SourceKind.values)}", field="kind")
    if source.strategy not in SourceStrategy.values:
        raise TrawlError(f"strategy must be one of {', '.join(SourceStrategy.values)}", field="strategy")
    priority_check(source.priority)
    _check_schedule(source)
    if not isinstance(source.config, dict):
        raise TrawlError("config must be a JSON object", field="config")
    children = source.config.get("children")
    if children is not None and not isinstance(children, dict):
        raise TrawlError("config.children must be an object, e.g. {'scraper': 'selectors'}", field="config")
    if children and children.get("scraper"):
        _scraper(children["scraper"])
    try:
        # Its regexes on RE2, its selectors without extension functions, its `max_urls` within the cap.
        config_check(source.config, bounds=input_bounds(), prefix="")
    except PatternError as exc:
        raise TrawlError(str(exc), field="config") from None
    job_args_validate(source.args)
    _check_budget(source.config)


def _check_budget(config: dict) -> None:
    """`max_pages` / `max_items` in a source's config bound each of its jobs, as the job options do."""
    for name, most in (
        ("max_pages", settings.TRAWL_JOB_MAX_PAGES_LIMIT),
        ("max_items", settings.TRAWL_JOB_MAX_ITEMS_LIMIT),
    ):
        value = config.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most):
            raise TrawlError(f"config.{name} must be a whole number 1..{most}", field="config")


def _check_schedule(source: Source) -> None:
    shortest = settings.TRAWL_SCHEDULING_MIN_INTERVAL
    if source.min_interval < shortest:
        raise TrawlError(f"min_interval must be at least {shortest} seconds", field="min_interval")
    if not source.min_interval <= source.refresh_interval <= source.max_interval:
        raise TrawlError(
            "intervals must satisfy min_interval <= refresh_interval <= max_interval", field="refresh_interval"
        )
    hours = (source.window_start_hour, source.window_end_hour)
    if (hours[0] is None) != (hours[1] is None):
        raise TrawlError("a crawl window needs both window_start_hour and window_end_hour", field="window_end_hour")
    if hours[0] is not None and (hours[0] == hours[1] or not all(0 <= hour <= 23 for hour in hours)):
        raise TrawlError("window hours are two different hours 0..23 (22 and 6 is the night)", field="window_end_hour")
    try:
        validate_timezone(source.timezone)
    except ValidationError as exc:
        raise TrawlError(exc.messages[0], field="timezone") from exc
    if source.cron:
        try:
            cron_parse(source.cron)
        except CronError as exc:
            raise TrawlError(f"cron: {exc}", field="cron") from None


def source_cron_book(*, source: Source, fields: dict[str, Any]) -> None:
    """A cron given or changed, with no `next_sync_at` asked: the source first runs at the expression's next minute."""
    if "cron" in fields and source.cron and "next_sync_at" not in fields:
        source_check(source)
        source.next_sync_at = cron_next(source.cron, after=timezone.now(), timezone=source.timezone)


def source_save(*, source: Source) -> Source:
    """Check and store a source; its current interval stays within its bounds. Used by the API and the admin."""
    source_check(source)
    source.current_interval = clamp(source.current_interval, source.min_interval, source.max_interval)
    try:
        with transaction.atomic():
            source.save()
    except IntegrityError as exc:
        raise TrawlError("this scraper already has a source for this URL", field="url") from exc
    return source


@transaction.atomic
def source_create(*, url: str, scraper: str = "", kind: str = SourceKind.LIST, **fields: Any) -> Source:
    """Add a source, due at once unless `next_sync_at` says otherwise. `fields` are any of EDITABLE.

    A sitemap source defaults to the `sitemap` scraper and strategy `discovery`; min/max intervals default to the
    model's unless the refresh interval lies outside them.
    """
    _editable(fields)
    is_sitemap = kind == SourceKind.SITEMAP
    scraper_name = scraper or (SITEMAP_SCRAPER if is_sitemap else settings.TRAWL_DEFAULT_SCRAPER)
    fields.setdefault("strategy", SourceStrategy.DISCOVERY if is_sitemap else SourceStrategy.DEEP)
    refresh = fields.setdefault("refresh_interval", _default("refresh_interval"))
    fields.setdefault("min_interval", min(_default("min_interval"), refresh))
    fields.setdefault("max_interval", max(_default("max_interval"), refresh))
    source = Source(url=url, kind=kind, scraper=_scraper(scraper_name), current_interval=refresh, **fields)
    source_cron_book(source=source, fields=fields)
    return source_save(source=source)


@transaction.atomic
def source_update(*, source: Source, scraper: str = "", **fields: Any) -> Source:
    """Change some fields. A new refresh interval restarts the adaptation from it."""
    _editable(fields)
    source = Source.objects.select_for_update().get(pk=source.pk)
    if scraper:
        source.scraper = _scraper(scraper)
    for name, value in fields.items():
        setattr(source, name, value)
    if "refresh_interval" in fields:
        source.current_interval = source.refresh_interval
    source_cron_book(source=source, fields=fields)
    return source_save(source=source)


def source_delete(*, source: Source) -> None:
    """Its jobs and the sources it discovered stay, no longer linked to it."""
    source.delete()


@transaction.atomic
def source_crawl_now(*, source: Source, requester: Requester | None = None) -> CrawlJob:
    """Queue a job for the source now, whatever its schedule; the next run is planned again when the job ends."""
    source = Source.objects.select_for_update().select_related("scraper").get(pk=source.pk)
    active = source.jobs.filter(status__in=ACTIVE_STATUSES).first()
    if active is not None:
        message = f"this source's job {active.pk} is still {active.status}; a source runs one job at a time"
        raise TrawlError(message, status_code=409)
    # Booked like a dispatch, so a dispatcher running at this moment passes it by.
    now = timezone.now()
    source.next_sync_at = max(source.next_sync_at, now + timedelta(seconds=source.current_interval))
    source.save(update_fields=["next_sync_at", "updated_at"])
    return job_create(
        url=source.url,
        scraper=source.scraper.name,
        priority=source.priority,
        args=source.args,
        source=source,
        requester=requester,
    )
