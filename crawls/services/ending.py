"""The one way a job reaches a final state, and what always follows.

Whoever ends a job — the worker that ran it, a cancel of the job or of its batch, the reaper burying a job whose
worker died on its last attempt, the batch sweeper ending lost jobs — calls `job_end` (or `jobs_end` for many).
It moves the job with a compare-and-set from the state the caller saw (status and attempt), so a late worker, a
second reaper or a racing cancel can never end a job twice. The source's feedback (next run, interval, last stats)
commits with the final state, so whoever sees the job ended sees its source's next run booked. Once that commits,
the same follow-ups run every time: the version's rollback check, the webhook, the counters, the frontier's
cleanup and the batch's end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from callbacks.services import job_event_emit
from crawls.frontier import frontier_delete
from crawls.models import ACTIVE_STATUSES, CrawlJob, ErrorClass, JobStatus
from crawls.publish import publish_batch_finalize
from ops.logcapture import job_log_flush
from ops.services import job_finished_record
from registry.services import version_rollback_check
from sources.services.feedback import source_job_feedback

logger = logging.getLogger("trawl.jobs")

MESSAGE_MAX = 4000


def final_status(error_class: str) -> JobStatus:
    """A job without an error class succeeded; `cancelled` and `worker_lost` have statuses of their own."""
    if not error_class:
        return JobStatus.SUCCEEDED
    if error_class == ErrorClass.CANCELLED:
        return JobStatus.CANCELLED
    if error_class == ErrorClass.WORKER_LOST:
        return JobStatus.DEAD
    return JobStatus.FAILED


def job_end(
    *,
    job: CrawlJob,
    error_class: str = "",
    message: str = "",
    stats: dict[str, Any] | None = None,
    expected_status: str = JobStatus.RUNNING,
) -> CrawlJob | None:
    """End the job if it is still in `expected_status` at `job.attempt`; None if someone else got there first."""
    job_log_flush()  # this process may be running the job: its log readable before its final status is
    ended = jobs_end(
        jobs=CrawlJob.objects.filter(pk=job.pk, attempt=job.attempt),
        error_class=error_class,
        message=message,
        stats=stats,
        expected_status=expected_status,
    )
    if not ended:
        logger.warning("job %s attempt %s no longer %s; outcome dropped", job.pk, job.attempt, expected_status)
        return None
    job_log_flush()  # and the `job finish` line its follow-ups logged, for `crawl --wait --log`
    return ended[0]


def jobs_end(
    *,
    jobs: QuerySet[CrawlJob],
    error_class: str = "",
    message: str = "",
    stats: dict[str, Any] | None = None,
    expected_status: str = JobStatus.RUNNING,
) -> list[CrawlJob]:
    """End every job of `jobs` still in `expected_status`, each by its own compare-and-set; return those ended."""
    fields: dict[str, Any] = {
        "status": final_status(error_class),
        "error_class": error_class,
        "error_message": message[:MESSAGE_MAX],
        "finished_at": timezone.now(),
    }
    if stats is not None:
        fields["stats"] = stats
    with transaction.atomic():
        ended_ids = [
            job_id
            for job_id, attempt in jobs.filter(status=expected_status).values_list("id", "attempt")
            if CrawlJob.objects.filter(pk=job_id, status=expected_status, attempt=attempt).update(**fields)
        ]
        ended = list(CrawlJob.objects.filter(pk__in=ended_ids).select_related("scraper", "source", "version"))
        for job in ended:
            _guarded(source_feedback, job)
        if ended:
            transaction.on_commit(lambda: jobs_followups(jobs=ended))
    return ended


def jobs_followups(*, jobs: Iterable[CrawlJob]) -> None:
    """What follows every final state, once it is committed. One follow-up failing never skips the others."""
    batch_ids = set()
    for job in jobs:
        for followup in JOB_FOLLOWUPS:
            _guarded(followup, job)
        if job.batch_id:
            batch_ids.add(job.batch_id)
    for batch_id in batch_ids:
        _guarded(batch_end_if_done, batch_id)


def source_feedback(job: CrawlJob) -> None:
    if job.source_id:
        with transaction.atomic():  # a savepoint in jobs_end: a failure rolls back only the feedback
            source_job_feedback(job=job)


def rollback_check(job: CrawlJob) -> None:
    version_rollback_check(version_id=job.version_id)


def webhook(job: CrawlJob) -> None:
    if job.callback_url:
        job_event_emit(job=job)


def counters(job: CrawlJob) -> None:
    job_finished_record(job=job)


def frontier_cleanup(job: CrawlJob) -> None:
    """The job's frontier in Redis (queue, seen-set, in-flight requests) is of no use once it ended."""
    frontier_delete(job_id=job.pk)


def batch_end_if_done(batch_id: object) -> None:
    """Ask for the batch's finalization once its last job ended (finalizing is idempotent; the chord may too)."""
    if not CrawlJob.objects.filter(batch_id=batch_id, status__in=ACTIVE_STATUSES).exists():
        publish_batch_finalize(batch_id=batch_id)


JOB_FOLLOWUPS: tuple[Callable[[CrawlJob], None], ...] = (
    rollback_check,
    webhook,
    counters,
    frontier_cleanup,
)


def _guarded(followup: Callable[[Any], None], subject: Any) -> None:
    try:
        followup(subject)
    except Exception:  # a follow-up that fails (broker away, a bug) must not undo or hide the job's end
        logger.exception("%s after the end of %s failed", followup.__name__, subject)
