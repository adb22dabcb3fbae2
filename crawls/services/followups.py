"""What always follows a job's final state, whoever ended it (crawls.services.lifecycle.job_end / jobs_end).

The source's feedback (next run, interval, last stats) commits with the final state, so whoever sees the job ended
sees its source's next run booked. Once that commits, the same follow-ups run every time: the version's rollback
check, the webhook, the monitor alerts, the counters, the frontier's cleanup and the batch's end. One failing never
undoes the end nor skips the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction

from callbacks.services import job_event_emit
from crawls.frontier import frontier_delete
from crawls.models import ACTIVE_STATUSES, CrawlJob
from crawls.publish import publish_batch_finalize
from ops.alerts import job_alert_emit
from ops.services import job_finished_record
from registry.services import version_rollback_check
from sources.services.feedback import source_job_feedback

logger = logging.getLogger("trawl.jobs")


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
    """The one follow-up inside the end's transaction: it commits with the final state, or (a savepoint) alone
    rolls back, leaving the end and the other follow-ups be."""
    _guarded(_source_feedback, job)


def _source_feedback(job: CrawlJob) -> None:
    if job.source_id:
        with transaction.atomic():
            source_job_feedback(job=job)


def rollback_check(job: CrawlJob) -> None:
    version_rollback_check(version_id=job.version_id)


def webhook(job: CrawlJob) -> None:
    if job.callback_url:
        job_event_emit(job=job)


def alert(job: CrawlJob) -> None:
    """One signed `job.alert` per receiver for the monitor breaches the end stored (ops.monitoring found them)."""
    if job.alerts:
        job_alert_emit(job=job)


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
    alert,
    counters,
    frontier_cleanup,
)


def _guarded(followup: Callable[[Any], None], subject: Any) -> None:
    try:
        followup(subject)
    except Exception:  # a follow-up that fails (broker away, a bug) must not undo or hide the job's end
        logger.exception("%s after the end of %s failed", followup.__name__, subject)
