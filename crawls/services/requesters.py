"""A requester going away takes its unfinished work with it.

A job keeps its requester only as a nullable key: once the requester is deleted a queued job would run as nobody's,
which Trawl reads as the system tenant's (scheduled and admin work: no cap, no private-target guard). So as a
requester is deleted (the admin, a shell, a cascade), before its key is cleared, every job of it that has not ended
is cancelled with the reason, and its open batches with them."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import pre_delete
from django.utils import timezone

from access.models import Requester
from crawls.live.cancel import cancel_request
from crawls.models import ACTIVE_STATUSES, Batch, CrawlJob, ErrorClass, JobStatus
from crawls.services.cancelling import batch_cancel
from crawls.services.lifecycle import jobs_end

logger = logging.getLogger("trawl.jobs")


@transaction.atomic
def requester_jobs_cancel(*, requester: Requester, reason: str) -> int:
    """Cancel every job of `requester` that has not ended: queued ones end `cancelled` now, running ones are asked to
    stop (their crawl ends `cancelled` within about a second). Its open batches are cancelled as a whole. Returns
    how many jobs were active."""
    for batch in Batch.objects.filter(requester=requester, finished_at__isnull=True):
        batch_cancel(batch=batch)
    active = CrawlJob.objects.filter(requester=requester, status__in=ACTIVE_STATUSES)
    running = list(active.filter(status=JobStatus.RUNNING).values_list("id", flat=True))
    for job_id in running:
        cancel_request(job_id=job_id)
    active.filter(cancel_requested_at__isnull=True).update(cancel_requested_at=timezone.now())
    ended = jobs_end(jobs=active, error_class=ErrorClass.CANCELLED, message=reason, expected_status=JobStatus.QUEUED)
    if ended or running:
        logger.warning(
            "requester %s: %s queued job(s) cancelled, %s running asked to stop (%s)",
            requester.name,
            len(ended),
            len(running),
            reason,
        )
    return len(ended) + len(running)


def requester_deleting(sender, instance: Requester, **_kwargs) -> None:
    requester_jobs_cancel(requester=instance, reason=f"cancelled: its requester {instance.name!r} was deleted")


def connect() -> None:
    # pre_delete: the jobs still name their requester here; after the delete they would name nobody (SET_NULL).
    pre_delete.connect(requester_deleting, sender=Requester, dispatch_uid="crawls.requester_deleting", weak=False)
