"""Crawls' answers to what registry asks about its versions' jobs (registry.hooks.JobFacts, provided as this module in
CrawlsConfig.ready): the per-version outcome numbers operators and canary rollback decide on, and which packages
running jobs use. Read queries over CrawlJob, so they live with it."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, Q

from crawls.models import CrawlJob, JobRecording, JobReplay, JobStatus
from registry.models import ScraperVersion
from registry.outcomes import VersionOutcome

# Jobs a version is judged on. Cancelled jobs are an operator's doing, not the version's, so they are counted apart.
JUDGED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.DEAD)


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


def packages_running(sha256s: Iterable[str]) -> set[str]:
    """Of these package hashes, those a running job uses."""
    running = CrawlJob.objects.filter(version__package__sha256__in=set(sha256s), status=JobStatus.RUNNING)
    return set(running.values_list("version__package__sha256", flat=True))


def replay_problem(*, version: ScraperVersion) -> str:
    """Why `version` has no clean replay of its scraper's latest recorded job ("" when it has one, or when the scraper
    has no recorded job yet: nothing to compare with)."""
    recorded = (
        CrawlJob.objects.filter(scraper_id=version.scraper_id, status=JobStatus.SUCCEEDED)
        .filter(pk__in=JobRecording.objects.values("job_id"))
        .order_by("-finished_at")
        .first()
    )
    if recorded is None:
        return ""
    how = f'POST /api/jobs/{recorded.pk}/replay/ {{"version": "{version.version}"}}'
    replay = JobReplay.objects.filter(job=recorded, version_id=version.pk).exclude(finished_at=None).first()
    if version.pk is None or replay is None:
        return f"no replay of its latest recorded job {recorded.pk} by {version.version} yet ({how})"
    if replay.status != JobReplay.Status.CLEAN:
        summary = replay.error or (replay.report or {}).get("summary", "")
        return f"replay {replay.pk} of job {recorded.pk} is {replay.status}: {summary}"
    return ""
