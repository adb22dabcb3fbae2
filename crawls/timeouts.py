"""How long a job's crawl may run: one answer for the runner, the Celery limits and `manage.py crawl`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:  # celeryconfig imports this module before Django's apps are loaded: no model imports at run time
    from crawls.models import CrawlJob
    from registry.models import ScraperVersion

TIMEOUT_SETTING = "TRAWL_JOB_TIMEOUT"
# Celery's limits sit above the job timeout: the runner stops a crawl itself at the timeout and then has this long
# to stop the engine and write the outcome; the soft limit interrupts a task stuck past that, the hard one kills it.
SOFT_LIMIT_MARGIN = 90
HARD_LIMIT_MARGIN = 150


def version_timeout(version: ScraperVersion) -> float:
    """Its own TRAWL_JOB_TIMEOUT, else its scraper's, else the project's."""
    for scope in (version.settings or {}, version.scraper.settings or {}):
        if scope.get(TIMEOUT_SETTING):
            return float(scope[TIMEOUT_SETTING])
    return float(settings.TRAWL_JOB_TIMEOUT)


def job_timeout(job: CrawlJob, version: ScraperVersion | None = None) -> float:
    """The timeout of the version that runs (or ran) the job. Before routing, the longest any active version of the
    job's scraper could get, so the Celery limits given at publish time never cut a slower version short."""
    version = version or (job.version if job.version_id else None)
    if version is not None:
        return version_timeout(version)
    candidates = job.scraper.versions.filter(deprecated_at__isnull=True).select_related("scraper")
    timeouts = [version_timeout(candidate) for candidate in candidates]
    return max([float(settings.TRAWL_JOB_TIMEOUT), *timeouts])


def celery_time_limits(timeout: float) -> tuple[float, float]:
    """(soft, hard) Celery time limits for a crawl with this timeout."""
    return timeout + SOFT_LIMIT_MARGIN, timeout + HARD_LIMIT_MARGIN
