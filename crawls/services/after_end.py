"""What always follows a job's final state, whoever ended it (crawls.services.lifecycle.job_end / jobs_end).

The source's feedback (next run, interval, last stats) commits with the final state, so whoever sees the job ended
sees its source's next run booked. Once that commits, the same follow-ups run every time: the version's rollback
check, the webhook, the frontier's cleanup, what ops subscribed (crawls.hooks: monitor alerts, counters) and the
batch's end. One failing never undoes the end nor skips the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.db import transaction

from access.tenancy import job_tenant_id
from crawls import hooks
from crawls.models import ACTIVE_STATUSES, CrawlJob
from crawls.publish import publish_batch_finalize
from crawls.webhooks import job_event_emit
from items.history.notify import job_history_followup
from project.sentry import sentry_job_failed
from registry.services import version_rollback_check
from runtime.frontier import frontier_delete

logger = logging.getLogger("trawl.jobs")


def jobs_followups(*, jobs: Iterable[CrawlJob]) -> None:
    """What follows every final state, once it is committed. One follow-up failing never skips the others."""
    batch_ids = set()
    for job in jobs:
        for followup in (*JOB_FOLLOWUPS, *hooks.JOB_ENDED):
            _guarded(followup, job)
        if job.batch_id:
            batch_ids.add(job.batch_id)
    for batch_id in batch_ids:
        _guarded(batch_end_if_done, batch_id)


def source_feedback(job: CrawlJob) -> None:
    """The follow-ups inside the end's transaction (sources' feedback, subscribed to crawls.hooks.JOB_ENDING): each
    commits with the final state, or (a savepoint) alone rolls back, leaving the end and the other follow-ups be."""
    for receiver in hooks.JOB_ENDING:
        _guarded(_in_savepoint(receiver), job)


def _in_savepoint(receiver: Callable[[CrawlJob], None]) -> Callable[[CrawlJob], None]:
    def run(job: CrawlJob) -> None:
        with transaction.atomic():
            receiver(job)

    run.__name__ = receiver.__name__
    return run


def rollback_check(job: CrawlJob) -> None:
    version_rollback_check(version_id=job.version_id)


def webhook(job: CrawlJob) -> None:
    if job.callback_url:
        job_event_emit(job=job)


def item_history(job: CrawlJob) -> None:
    """The bound of each item the job changed, and the `item.changed` webhooks: its items are all stored by now."""
    job_history_followup(job_id=job.pk, source_id=job.source_id, tenant_id=job_tenant_id(requester_id=job.requester_id))


def frontier_cleanup(job: CrawlJob) -> None:
    """The job's frontier in Redis (queue, seen-set, in-flight requests) is of no use once it ended."""
    frontier_delete(job_id=job.pk, ttl_seconds=settings.TRAWL_FRONTIER_TTL_SECONDS)


def batch_end_if_done(batch_id: object) -> None:
    """Ask for the batch's finalization once its last job ended (finalizing is idempotent; the chord may too)."""
    if not CrawlJob.objects.filter(batch_id=batch_id, status__in=ACTIVE_STATUSES).exists():
        publish_batch_finalize(batch_id=batch_id)


def sentry_report(job: CrawlJob) -> None:
    """A job that ended in an error of its code or of Trawl is one Sentry event (when SENTRY_DSN is set)."""
    if job.error_class in settings.TRAWL_SENTRY_JOB_ERRORS:
        version = job.version.version if job.version_id else ""
        sentry_job_failed(
            job_id=job.pk,
            scraper=job.scraper.name,
            version=version,
            error_class=job.error_class,
            message=job.error_message,
        )


JOB_FOLLOWUPS: tuple[Callable[[CrawlJob], None], ...] = (
    rollback_check,
    webhook,
    item_history,
    frontier_cleanup,
    sentry_report,
)  # then the receivers of crawls.hooks.JOB_ENDED: ops' alerts and counters (ops/apps.py)


def _guarded(followup: Callable[[Any], None], subject: Any) -> None:
    try:
        followup(subject)
    except Exception:  # a follow-up that fails (broker away, a bug) must not undo or hide the job's end
        logger.exception("%s after the end of %s failed", followup.__name__, subject)
