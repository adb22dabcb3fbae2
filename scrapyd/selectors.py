"""Reads the scrapyd endpoints answer from: projects (scrapers with packaged versions) and the requester's jobs."""

from __future__ import annotations

import time
import uuid

from django.db.models import Count, QuerySet

from access.models import Requester
from crawls.models import ACTIVE_STATUSES, CrawlJob
from crawls.selectors import jobs_visible
from registry.models import PackageStatus, Scraper, ScraperVersion
from registry.selectors import by_semver, scrapers_by_name, versions_of_scraper_named
from scrapyd.labels import label_of

FINISHED_TO_KEEP = 100  # scrapyd's default


def projects() -> list[str]:
    """Scrapers with a live packaged version: what scrapyd would call its projects."""
    live = scrapers_by_name().filter(versions__package__isnull=False, versions__deprecated_at__isnull=True)
    return list(live.values_list("name", flat=True).distinct())


def project_named(name: str) -> Scraper | None:
    return scrapers_by_name().filter(name=name).first()


def project_versions(*, project: str) -> list[ScraperVersion]:
    """The project's live packaged versions, oldest first (scrapyd lists the latest last)."""
    live = versions_of_scraper_named(scraper_name=project).filter(package__isnull=False, deprecated_at__isnull=True)
    return by_semver(live, newest_first=False)


def all_versions(*, project: str) -> QuerySet[ScraperVersion]:
    """Every version of the project, deprecated ones too (a new upload's version must differ from all of them)."""
    return versions_of_scraper_named(scraper_name=project)


def project_version(*, project: str, label: str) -> ScraperVersion | None:
    """The live version a scrapyd label (or the semantic version itself) names."""
    return next((v for v in project_versions(project=project) if label in (v.version, label_of(v.version))), None)


def version_built(*, version_id: int, seconds: float, poll: float = 0.25) -> ScraperVersion:
    """The version once a worker has built it (`ready` or `failed`), or as it stands after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        version = ScraperVersion.objects.get(pk=version_id)
        if version.package_status != PackageStatus.BUILDING or time.monotonic() >= deadline:
            return version
        time.sleep(poll)


def project_jobs(*, requester: Requester, project: str = "") -> QuerySet[CrawlJob]:
    """The requester's jobs (every job for an admin), of one project if named, oldest first."""
    jobs = jobs_visible(requester=requester).order_by("queued_at")
    return jobs.filter(scraper__name=project) if project else jobs


def project_jobs_listed(*, requester: Requester, project: str = "") -> list[CrawlJob]:
    """What listjobs.json lists: every pending and running job, and the FINISHED_TO_KEEP that ended last (scrapyd's
    `finished_to_keep`: Trawl keeps every job, and GET /api/jobs/ pages through them all)."""
    jobs = project_jobs(requester=requester, project=project)
    ended = jobs.exclude(status__in=ACTIVE_STATUSES).order_by("-finished_at", "-queued_at")[:FINISHED_TO_KEEP]
    return [*jobs.filter(status__in=ACTIVE_STATUSES), *reversed(ended)]


def job_counts(*, requester: Requester) -> dict[str, int]:
    """The requester's jobs (every job for an admin) by status."""
    rows = CrawlJob.objects.filter(pk__in=jobs_visible(requester=requester).values("pk")).values("status")
    return {row["status"]: row["n"] for row in rows.annotate(n=Count("pk")).order_by()}


def project_job(*, requester: Requester, job_id: str, project: str = "") -> CrawlJob | None:
    """One of `project_jobs`; None for an id that is not a job's (a job id is a UUID) or not the requester's."""
    try:
        uuid.UUID(job_id)
    except ValueError:
        return None
    return project_jobs(requester=requester, project=project).filter(pk=job_id).first()
