"""Reads over scrapers and versions, and the per-version outcome numbers operators (and rollback) decide on."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from crawls.models import CrawlJob, JobStatus
from project.errors import TrawlError
from registry.cache import version_cache
from registry.models import Scraper, ScraperVersion, Variant
from registry.semver import semver_key

# Jobs a version is judged on. Cancelled jobs are an operator's doing, not the version's, so they are counted apart.
JUDGED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.DEAD)


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


@dataclass(frozen=True)
class VersionOutcome:
    """What a version's jobs did: `jobs` counts succeeded, failed and dead ones; cancelled ones are apart."""

    jobs: int = 0
    succeeded: int = 0
    cancelled: int = 0
    items: int = 0
    median_duration: float | None = None
    error_classes: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return self.jobs - self.succeeded

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.jobs if self.jobs else None

    @property
    def failure_rate(self) -> float | None:
        return self.failed / self.jobs if self.jobs else None

    @property
    def items_per_job(self) -> float | None:
        return self.items / self.jobs if self.jobs else None


def version_outcomes(
    *, versions: list[ScraperVersion], since: datetime | None = None, until: datetime | None = None
) -> dict[int, VersionOutcome]:
    """Outcome per version id of the jobs that ended in [since, until). One query; every version gets an entry."""
    jobs = CrawlJob.objects.filter(version__in=[v.pk for v in versions], status__in=[*JUDGED, JobStatus.CANCELLED])
    if since is not None:
        jobs = jobs.filter(finished_at__gte=since)
    if until is not None:
        jobs = jobs.filter(finished_at__lt=until)
    rows = jobs.values_list("version_id", "status", "error_class", "stats__items", "started_at", "finished_at")
    tally: dict[int, dict] = {
        v.pk: {"n": 0, "ok": 0, "cancelled": 0, "items": 0, "d": [], "e": Counter()} for v in versions
    }
    for version_id, status, error_class, items, started_at, finished_at in rows.iterator():
        counts = tally[version_id]
        if status == JobStatus.CANCELLED:
            counts["cancelled"] += 1
            continue
        counts["n"] += 1
        counts["ok"] += status == JobStatus.SUCCEEDED
        counts["items"] += items if isinstance(items, int) else 0
        if status != JobStatus.SUCCEEDED:
            counts["e"][error_class or "unknown"] += 1
        if started_at and finished_at:
            counts["d"].append((finished_at - started_at).total_seconds())
    return {
        version_id: VersionOutcome(
            jobs=c["n"],
            succeeded=c["ok"],
            cancelled=c["cancelled"],
            items=c["items"],
            median_duration=statistics.median(c["d"]) if c["d"] else None,
            error_classes=dict(c["e"].most_common()),
        )
        for version_id, c in tally.items()
    }


def failure_counts(
    *, version: ScraperVersion, since: datetime | None = None, last: int | None = None
) -> VersionOutcome:
    """Jobs and successes only (cheap enough to run after every job): since a time, or the `last` N ended jobs."""
    jobs = CrawlJob.objects.filter(version=version, status__in=JUDGED)
    if since is not None:
        jobs = jobs.filter(finished_at__gte=since)
    if last is not None:
        statuses = list(jobs.order_by("-finished_at").values_list("status", flat=True)[:last])
        return VersionOutcome(jobs=len(statuses), succeeded=statuses.count(JobStatus.SUCCEEDED))
    counts = jobs.aggregate(jobs=Count("id"), succeeded=Count("id", filter=Q(status=JobStatus.SUCCEEDED)))
    return VersionOutcome(jobs=counts["jobs"], succeeded=counts["succeeded"])


# Windows the comparison offers; a number of seconds is accepted too.
WINDOWS = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400, "all": None}
DEFAULT_WINDOW = "24h"


def window_start(window: str, *, now: datetime | None = None) -> datetime | None:
    """The start of a comparison window (`1h`, `24h`, `7d`, `30d`, `all` or seconds); None for all time."""
    value = (window or DEFAULT_WINDOW).strip()
    if value in WINDOWS:
        seconds = WINDOWS[value]
    elif value.isdigit() and int(value) > 0:
        seconds = int(value)
    else:
        raise TrawlError(f"window must be one of {', '.join(WINDOWS)} or a number of seconds", field="window")
    return None if seconds is None else (now or timezone.now()) - timedelta(seconds=seconds)


def scraper_comparison(
    *, scraper: Scraper, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """One row per version (newest first) with what its jobs that ended in the window did, side by side."""
    versions = versions_of(scraper=scraper)
    outcomes = version_outcomes(versions=versions, since=since, until=until)
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
