"""Reads over jobs, batches and screenshots (items: items.selectors)."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from access.models import Requester
from crawls.models import (
    ACTIVE_STATUSES,
    Batch,
    CrawlJob,
    JobErrorPage,
    JobRecording,
    JobReplay,
    JobScreenshot,
    JobStatus,
)


def jobs_visible(*, requester: Requester) -> QuerySet[CrawlJob]:
    """Admins see every job; a requester only its own (others' are simply not found). Each job comes with its
    `screenshot_count` (a subquery on the screenshots' job index: no join that would multiply the rows)."""
    shots = JobScreenshot.objects.filter(job=OuterRef("pk")).order_by().values("job").annotate(n=Count("pk"))
    jobs = (
        CrawlJob.objects.select_related("scraper", "version")
        .annotate(screenshot_count=Coalesce(Subquery(shots.values("n")), 0))
        .order_by("-queued_at")
    )
    return jobs if requester.is_admin else jobs.filter(requester=requester)


# A list's filter (crawls.filters) → its lookup. Time ranges: `_since` at or after, `_before` strictly before.
JOB_FILTERS = {
    "scraper": "scraper__name",
    "status": "status",
    "error_class": "error_class",
    "source": "source_id",
    "batch": "batch_id",
    "queued_since": "queued_at__gte",
    "queued_before": "queued_at__lt",
    "finished_since": "finished_at__gte",
    "finished_before": "finished_at__lt",
}
BATCH_FILTERS = {
    "status": "status",
    "created_since": "created_at__gte",
    "created_before": "created_at__lt",
    "finished_since": "finished_at__gte",
    "finished_before": "finished_at__lt",
}


def jobs_listed(*, requester: Requester, **filters: object) -> QuerySet[CrawlJob]:
    """`jobs_visible` narrowed by the given filters (JOB_FILTERS' names)."""
    return jobs_visible(requester=requester).filter(**{JOB_FILTERS[name]: value for name, value in filters.items()})


def job_previous_run(*, job: CrawlJob) -> CrawlJob | None:
    """The same source's run before this one that has ended (None for a job without a source)."""
    if not job.source_id:
        return None
    earlier = CrawlJob.objects.filter(source_id=job.source_id, queued_at__lt=job.queued_at)
    return earlier.exclude(status__in=ACTIVE_STATUSES).order_by("-queued_at", "-pk").first()


def jobs_of_source(*, source_id: int) -> QuerySet[CrawlJob]:
    """The source's jobs (its runs), newest first."""
    return CrawlJob.objects.filter(source_id=source_id).order_by("-queued_at", "-pk")


def batches_counted(batches: QuerySet[Batch] | None = None) -> QuerySet[Batch]:
    """Annotate live job counts by status (`n_queued`, `n_running`, ...) in the same query."""
    counts = {f"n_{status}": Count("jobs", filter=Q(jobs__status=status)) for status in JobStatus.values}
    return (Batch.objects.all() if batches is None else batches).annotate(**counts)


def batches_visible(*, requester: Requester) -> QuerySet[Batch]:
    """Like jobs: admins see every batch, a requester its own. Live job counts by status come annotated."""
    batches = batches_counted().order_by("-created_at")
    return batches if requester.is_admin else batches.filter(requester=requester)


def batches_listed(*, requester: Requester, **filters: object) -> QuerySet[Batch]:
    """`batches_visible` narrowed by the given filters (BATCH_FILTERS' names)."""
    lookups = {BATCH_FILTERS[name]: value for name, value in filters.items()}
    return batches_visible(requester=requester).filter(**lookups)


def batch_visible(*, requester: Requester, batch_id: object) -> Batch:
    """One batch as `batches_visible` reads it, with its live counts (DoesNotExist if the requester cannot see it)."""
    return batches_visible(requester=requester).get(pk=batch_id)


def batch_with_jobs(queryset: QuerySet[Batch]) -> QuerySet[Batch]:
    return queryset.prefetch_related(Prefetch("jobs", queryset=CrawlJob.objects.order_by("queued_at", "id")))


def batch_totals(batch: Batch) -> dict[str, int]:
    """Jobs by status, every status present: the stored totals once finished, else counted now."""
    totals = dict.fromkeys(JobStatus.values, 0)
    if batch.finished_at is not None and batch.totals:
        totals.update(batch.totals)
    elif hasattr(batch, "n_queued"):
        totals.update({status: getattr(batch, f"n_{status}") for status in JobStatus.values})
    else:
        rows = CrawlJob.objects.filter(batch=batch).values("status").annotate(n=Count("id"))
        totals.update({row["status"]: row["n"] for row in rows})
    return totals


def job_screenshots(*, job: CrawlJob) -> QuerySet[JobScreenshot]:
    """The job's screenshots, oldest first, without their images (GET /api/jobs/{id}/screenshots/{n}/ sends one)."""
    return JobScreenshot.objects.filter(job=job).defer("image")


def job_screenshot_count(*, job_id: object) -> int:
    return JobScreenshot.objects.filter(job_id=job_id).count()


def job_screenshot_images(*, job: CrawlJob) -> QuerySet[JobScreenshot]:
    """The job's screenshots with their images (GET /api/jobs/{id}/screenshots/{n}/ sends one)."""
    return JobScreenshot.objects.filter(job=job)


def job_error_pages(*, job: CrawlJob) -> QuerySet[JobErrorPage]:
    """The responses that made the job's spider raise, in the order kept, without their bodies."""
    return JobErrorPage.objects.filter(job=job).defer("body")


def job_error_page_bodies(*, job: CrawlJob) -> QuerySet[JobErrorPage]:
    """The same with their bodies (GET /api/jobs/{id}/error-pages/{number}/ sends one)."""
    return JobErrorPage.objects.filter(job=job)


def job_replays(*, job: CrawlJob) -> QuerySet[JobReplay]:
    """The job's replays, newest first."""
    return JobReplay.objects.filter(job=job).select_related("version")


def job_recordings(*, job: CrawlJob) -> QuerySet[JobRecording]:
    """The job's recordings (one per shard), without their WARC."""
    return JobRecording.objects.filter(job=job).defer("warc").order_by("shard")
