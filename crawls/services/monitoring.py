"""A job's monitors, from its scraper, version and source, checked when its crawl ends (worker side).

`job_monitors` gives the merged TRAWL_MONITORS the crawl's watchdogs read; `job_outcome_monitored` turns a watchdog's
stop into the job's error class, puts the breaches in the verdict (the job's end stores them and sends its `job.alert`
webhooks: crawls.services.lifecycle and after_end) and fails it for monitors marked `fail: true`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from django.conf import settings

from crawls.models import CrawlJob, ErrorClass, JobStatus
from project.errors import TrawlError
from registry.models import ScraperVersion
from registry.monitors import FIELD, Breach, coverage, monitors_check, monitors_parse
from runtime.bridge.outcome import CrawlVerdict
from runtime.watch.watchdogs import ERROR_RATE_REASON, STALLED_REASON

logger = logging.getLogger("trawl.monitors")
UNCHECKED = (ErrorClass.CANCELLED, ErrorClass.WORKER_LOST, ErrorClass.TIMEOUT)


def job_monitors(*, job: CrawlJob, version: ScraperVersion) -> dict[str, Any]:
    """TRAWL_MONITORS of scraper < version < source config, merged monitor by monitor; {} when they are invalid."""
    layers = (
        (version.scraper.settings or {}).get(FIELD),
        (version.settings or {}).get(FIELD),
        (job.source.config or {}).get(FIELD) if job.source_id else None,
    )
    merged: dict[str, Any] = {}
    try:
        monitors_parse(*layers)
    except TrawlError as exc:
        logger.warning("job %s: monitors ignored: %s", job.pk, exc.message)
        return merged
    for layer in layers:
        merged.update(layer or {})
    return merged


def job_outcome_monitored(
    *,
    job: CrawlJob,
    verdict: CrawlVerdict,
    stats: dict[str, Any],
    scrapy_stats: dict[str, Any],
    monitors: dict[str, Any],
) -> CrawlVerdict:
    """The job's final verdict once watchdogs and monitors had their say, its `alerts` the breaches found."""
    if verdict.error_class in UNCHECKED:
        return verdict
    watchdog = _watchdog_verdict(scrapy_stats)
    breaches = monitors_check(
        monitors_parse(monitors),
        stats=stats,
        field_coverage=coverage(scrapy_stats),
        history=_history(job) if "max_items_drop" in monitors else (),
    )
    alerts = [breach.as_alert() for breach in breaches]
    if breaches:
        logger.warning("job %s: monitors breached: %s", job.pk, ", ".join(_describe(b) for b in breaches))
    failing = [breach for breach in breaches if breach.fail]
    if watchdog is not None:
        verdict = watchdog
    elif failing and not verdict.error_class:
        verdict = CrawlVerdict(ErrorClass.MONITOR, "monitor failed: " + "; ".join(_describe(b) for b in failing))
    return replace(verdict, alerts=alerts)


def _watchdog_verdict(scrapy_stats: dict[str, Any]) -> CrawlVerdict | None:
    reason = scrapy_stats.get("finish_reason")
    if reason == STALLED_REASON:
        idle = scrapy_stats.get("watchdog/stalled_seconds", settings.TRAWL_STALL_SECONDS)
        return CrawlVerdict(
            ErrorClass.STALLED, f"stalled: no response and no item for {idle:g} s (TRAWL_STALL_SECONDS)"
        )
    if reason == ERROR_RATE_REASON:
        rate = scrapy_stats.get("watchdog/error_rate")
        return CrawlVerdict(ErrorClass.MONITOR, f"stopped early: error rate {rate} exceeded max_error_rate")
    return None


def _history(job: CrawlJob) -> list[int]:
    """Items of the source's last successful runs before this one (max_items_drop's baseline)."""
    if not job.source_id:
        return []
    runs = (
        CrawlJob.objects.filter(source_id=job.source_id, status=JobStatus.SUCCEEDED)
        .exclude(pk=job.pk)
        .order_by("-finished_at")
        .values_list("stats", flat=True)[: settings.TRAWL_MONITOR_HISTORY_RUNS]
    )
    return [int((stats or {}).get("items", 0)) for stats in runs]


def _describe(breach: Breach) -> str:
    return f"{breach.monitor} expected {breach.expected}, got {breach.actual}"
