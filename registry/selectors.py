"""Reads over scrapers and versions, and the per-version outcome numbers operators (and rollback) decide on."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from project.errors import TrawlError
from registry import hooks
from registry.cache import version_cache
from registry.models import Scraper, ScraperVersion, Variant
from registry.semver import semver_key


def by_semver(versions, *, newest_first: bool = True) -> list[ScraperVersion]:
    return sorted(versions, key=lambda v: semver_key(v.version), reverse=newest_first)


def versions_active(*, scraper: Scraper) -> list[ScraperVersion]:
    """The scraper's routable versions, newest first. Cached per process (see registry.cache): treat as read-only."""

    def load() -> list[ScraperVersion]:
        rows = ScraperVersion.objects.filter(scraper_id=scraper.pk, deprecated_at__isnull=True).select_related(
            "scraper", "package"
        )
        return by_semver(rows)

    return version_cache().get(scraper.pk, load)


def versions_of(*, scraper: Scraper) -> list[ScraperVersion]:
    """Every version, deprecated too, newest first. Never cached: for the admin and the API."""
    return by_semver(ScraperVersion.objects.filter(scraper=scraper).select_related("scraper"))


def traffic_of(*, scraper: Scraper) -> dict[str, int]:
    return {v.version: v.traffic_pct for v in versions_of(scraper=scraper) if v.is_active}


def stable_reference(*, scraper: Scraper) -> ScraperVersion | None:
    """The stable version a canary is measured against: the default if it is stable, else the latest stable."""
    stables = by_semver(
        ScraperVersion.objects.filter(scraper=scraper, variant=Variant.STABLE, deprecated_at__isnull=True)
    )
    return next((v for v in stables if v.is_default), stables[0] if stables else None)


# Windows the comparison offers; a number of seconds is accepted too.
WINDOWS = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400, "all": None}
DEFAULT_WINDOW = "24h"
# A number of seconds beyond a century is no window (and past timedelta's range a 500); ASCII digits only ('²').
WINDOW_MAX_SECONDS = 100 * 365 * 86_400


def window_start(window: str, *, now: datetime | None = None) -> datetime | None:
    """The start of a comparison window (`1h`, `24h`, `7d`, `30d`, `all` or seconds); None for all time."""
    value = (window or DEFAULT_WINDOW).strip()
    if value in WINDOWS:
        seconds = WINDOWS[value]
    elif value.isascii() and value.isdigit() and 0 < int(value) <= WINDOW_MAX_SECONDS:
        seconds = int(value)
    else:
        raise TrawlError(
            f"window must be one of {', '.join(WINDOWS)} or a number of seconds up to {WINDOW_MAX_SECONDS}",
            field="window",
        )
    return None if seconds is None else (now or timezone.now()) - timedelta(seconds=seconds)


def scraper_comparison(
    *, scraper: Scraper, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """One row per version (newest first) with what its jobs that ended in the window did, side by side."""
    versions = versions_of(scraper=scraper)
    outcomes = hooks.job_facts().version_outcomes(versions=versions, since=since, until=until)
    rows = []
    for version in versions:
        outcome = outcomes[version.pk]
        rows.append(
            {
                "id": version.pk,
                "version": version.version,
                "variant": version.variant,
                "state": version.state,
                "traffic_pct": version.traffic_pct,
                "is_default": version.is_default,
                "jobs": outcome.jobs,
                "succeeded": outcome.succeeded,
                "failed": outcome.failed,
                "cancelled": outcome.cancelled,
                "success_rate": outcome.success_rate,
                "items_per_job": outcome.items_per_job,
                "median_duration": outcome.median_duration,
                "error_classes": outcome.error_classes,
                "rolled_back_at": version.rolled_back_at,
                "rollback_reason": version.rollback_reason,
            }
        )
    return rows


def scrapers_by_name() -> QuerySet[Scraper]:
    return Scraper.objects.order_by("name")


def versions_of_scraper_named(*, scraper_name: str) -> QuerySet[ScraperVersion]:
    """The versions of the scraper with this name, each with its scraper loaded (unordered: `versions_of` sorts)."""
    return ScraperVersion.objects.filter(scraper__name=scraper_name).select_related("scraper")
