"""Reads: the stats report behind `GET /api/stats/`, and the numbers the admin dashboard draws."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
from ops import stats
from ops.queues import queue_depths, queue_samples
from ops.stats import (
    FINAL_STATUSES,
    LIFETIME,
    stats_per_minute,
    stats_windows,
    summarize,
    tenant_kind,
    throttle_numbers,
)
from ops.workers import workers_report
from throttling.slowed import throttle_slowed_top

KINDS = (("domains", "domain"), ("scrapers", "scraper"), ("versions", "version"))


def window_names() -> list[str]:
    return [*map(str, settings.TRAWL_STATS_WINDOWS), LIFETIME]


def stats_report(*, now: float | None = None, tenant: int | None = None) -> dict[str, Any]:
    """Rolling windows per dimension ({name: {window: numbers}}), queue depths, active jobs and workers.

    With a tenant (a requester's token): that tenant's own numbers and active jobs only; the queues and workers,
    which are everyone's, are left out."""
    windows = stats_windows(now=now)
    order = window_names()

    def kind_of(kind: str) -> str:
        return kind if tenant is None else tenant_kind(tenant, kind)

    report: dict[str, Any] = {
        "generated_at": timezone.now(),
        "windows": order,
        "totals": {window: summarize(windows[window].get(kind_of("all"), {}).get("", {})) for window in order},
    }
    for plural, kind in KINDS:
        rows = {window: windows[window].get(kind_of(kind), {}) for window in order}
        names = sorted({name for window in order for name in rows[window]})
        report[plural] = {name: {window: summarize(rows[window].get(name, {})) for window in order} for name in names}
    report["jobs_active"] = jobs_active(requester=tenant)
    if tenant is None:
        report["queues"] = queue_depths()
        report["workers"] = workers_report()
        # The domains the adaptive controller slowed most, and why, and how many it slowed (docs/throttling.md).
        slowed, count = throttle_slowed_top(limit=settings.TRAWL_METRICS_MAX_DOMAINS)
        report["throttle"] = {"adaptive": slowed, "slowed": count}
    return report


def jobs_active(*, requester: int | None = None) -> dict[str, int]:
    counts = dict.fromkeys(ACTIVE_STATUSES, 0)
    jobs = CrawlJob.objects.filter(status__in=ACTIVE_STATUSES)
    if requester is not None:
        jobs = jobs.filter(requester_id=requester)
    rows = jobs.values("status").annotate(n=Count("id"))
    counts.update({row["status"]: row["n"] for row in rows})
    return {str(status): n for status, n in counts.items()}


def throttle_waits_now() -> dict[str, dict[str, float]]:
    """Throttle waits of the jobs running now (from their last heartbeat's stats), per domain."""
    waits: dict[str, dict[str, float]] = {}
    for url, job_stats in CrawlJob.objects.filter(status=JobStatus.RUNNING).values_list("url", "stats"):
        domain = _domain(url)
        numbers = throttle_numbers(job_stats or {})
        row = waits.setdefault(domain, {"jobs": 0, "waits": 0, "wait_seconds": 0.0})
        row["jobs"] += 1
        row["waits"] += numbers["waits"]
        row["wait_seconds"] += numbers["wait_seconds"]
    return waits


def dashboard_data(*, now: float | None = None) -> dict[str, Any]:
    """Everything the dashboard's charts and tables show, JSON-ready."""
    now = stats.clock() if now is None else now
    windows = stats_windows(now=now)
    return {
        "generated_at": _iso(now),
        "jobs_per_minute": _jobs_per_minute(now),
        "pages_per_domain": _pages_per_domain(windows),
        "queue_depth": _queue_depth(now),
        "throttle": _throttle(windows),
        "versions": _versions(),
        "totals": {window: summarize(windows[window].get("all", {}).get("", {})) for window in window_names()},
        "jobs_active": jobs_active(),
        "workers": [
            {**row, "last_heartbeat": _iso_dt(row["last_heartbeat"]), "seen_at": _iso_dt(row["seen_at"])}
            for row in workers_report()
        ],
    }


def _jobs_per_minute(now: float) -> dict[str, Any]:
    series = stats_per_minute(minutes=settings.TRAWL_STATS_DASHBOARD_MINUTES, now=now)
    return {
        "labels": [_iso(start) for start, _ in series],
        "series": {status: [int(values.get(status, 0)) for _, values in series] for status in FINAL_STATUSES},
    }


def _pages_per_domain(windows: dict[str, Any], top: int = 15) -> dict[str, Any]:
    hour, day = windows["3600"].get("domain", {}), windows["86400"].get("domain", {})
    names = sorted(day, key=lambda name: -day[name].get("pages", 0))[:top]
    return {
        "labels": names,
        "last_hour": [int(hour.get(name, {}).get("pages", 0)) for name in names],
        "last_day": [int(day[name].get("pages", 0)) for name in names],
    }


def _queue_depth(now: float) -> dict[str, Any]:
    samples = queue_samples(limit=settings.TRAWL_STATS_DASHBOARD_SAMPLES)
    samples.append({"t": now, **queue_depths()})  # always end on the depth right now
    queues = list(samples[-1]["queues"])
    return {
        "labels": [_iso(sample["t"]) for sample in samples],
        "series": {q: [sample["queues"].get(q, {}).get("total", 0) for sample in samples] for q in queues},
        "now": samples[-1],
    }


def _throttle(windows: dict[str, Any]) -> dict[str, Any]:
    recent = windows["900"].get("domain", {})
    running = throttle_waits_now()
    names = sorted(
        {name for name, m in recent.items() if m.get("throttle_wait_seconds") or m.get("throttle_waits")} | set(running)
    )
    return {
        "labels": names,
        "running_wait_seconds": [round(running.get(name, {}).get("wait_seconds", 0.0), 3) for name in names],
        "recent_wait_seconds": [round(recent.get(name, {}).get("throttle_wait_seconds", 0.0), 3) for name in names],
        "recent_waits": [int(recent.get(name, {}).get("throttle_waits", 0)) for name in names],
    }


def _versions() -> list[dict[str, Any]]:
    """The registry's per-version comparison (last 24 h) of every scraper that has versions."""
    from django.urls import NoReverseMatch, reverse

    from registry.models import Scraper
    from registry.selectors import scraper_comparison, window_start

    since = window_start("24h")
    scrapers = []
    for scraper in Scraper.objects.filter(versions__isnull=False).distinct().order_by("name"):
        rows = scraper_comparison(scraper=scraper, since=since)
        try:
            compare_url = reverse("admin:registry_scraper_compare", args=[scraper.pk])
        except NoReverseMatch:
            compare_url = ""
        scrapers.append({"scraper": scraper.name, "compare_url": compare_url, "rows": [_version_row(r) for r in rows]})
    return scrapers


def _version_row(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("version", "variant", "traffic_pct", "jobs", "succeeded", "failed", "success_rate", "median_duration")
    return {key: row.get(key) for key in keys}


def _domain(url: str) -> str:
    return urlsplit(url).hostname or "-"


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat(timespec="seconds")


def _iso_dt(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None
