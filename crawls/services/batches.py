"""Batches: many jobs submitted at once (checked together, nothing created if one is bad) and cancelled together.

Launching, finalizing and sweeping them is crawls.services.batch_runs.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from access.models import Requester
from crawls.cancel import cancel_request_batch
from crawls.models import ACTIVE_STATUSES, Batch, BatchStatus, ErrorClass, JobStatus
from crawls.publish import publish_batch_finalize, publish_batch_launch
from crawls.services.lifecycle import jobs_create_many, jobs_end
from crawls.services.validation import JobSpecsInvalid, validate_crawl_url
from project.errors import TrawlError
from project.net import target_check

logger = logging.getLogger("trawl.batches")


class BatchSpecError(TrawlError):
    """Some job specs of a batch are invalid; the 400 names each one: {"jobs": {"3": {"scraper": ["..."]}}}."""

    def __init__(self, errors: dict[int, dict[str, list[str]]]) -> None:
        super().__init__(f"job spec {min(errors)} is invalid", field="jobs")
        self.errors = errors

    def as_dict(self) -> dict:
        return {"jobs": {str(index): errors for index, errors in sorted(self.errors.items())}}


@transaction.atomic
def batch_create(
    *,
    jobs: list[dict[str, Any]],
    requester: Requester | None = None,
    name: str = "",
    priority: int = 50,
    callback_url: str = "",
) -> Batch:
    """Check every job spec first (nothing is created if one is bad), store the batch and its jobs queued, and
    queue the launcher task that publishes the chord once this commits. Job specs default to the batch priority."""
    if not jobs:
        raise TrawlError("a batch needs at least one job", field="jobs")
    if len(jobs) > settings.TRAWL_BATCH_MAX_JOBS:
        raise TrawlError(f"a batch holds at most {settings.TRAWL_BATCH_MAX_JOBS} jobs, got {len(jobs)}", field="jobs")
    if not 1 <= int(priority) <= 100:
        raise TrawlError(f"priority must be between 1 and 100, got {priority}", field="priority")
    if callback_url:
        validate_crawl_url(callback_url, field="callback_url")
        target_check(callback_url, field="callback_url")
    batch = Batch.objects.create(
        requester=requester, name=name, priority=priority, callback_url=callback_url, total=len(jobs)
    )
    try:
        jobs_create_many(specs=[{"priority": priority, **spec} for spec in jobs], requester=requester, batch=batch)
    except JobSpecsInvalid as exc:  # the transaction rolls back: the batch is not created either
        errors = {index: {error.field or "detail": [error.message]} for index, error in exc.errors.items()}
        raise BatchSpecError(errors) from None
    # robust: if the broker is away the batch stays `pending` and the sweeper launches it after the grace.
    transaction.on_commit(lambda: publish_batch_launch(batch=batch), robust=True)
    logger.info("batch %s created with %s jobs by %s", batch.pk, batch.total, requester)
    return batch


@transaction.atomic
def batch_cancel(*, batch: Batch) -> Batch:
    """Queued jobs end `cancelled` now; running crawls see their cancel flag and stop within a heartbeat; the batch
    then finalizes as `cancelled` (now if nothing runs, else when the chord or the sweeper gets there)."""
    batch = Batch.objects.select_for_update().get(pk=batch.pk)
    if batch.finished_at is not None:
        raise TrawlError(f"batch already ended as {batch.status}", status_code=409)
    active = list(batch.jobs.filter(status__in=ACTIVE_STATUSES).values_list("id", flat=True))
    # Flags first: a job claimed after this point sees its flag when it starts.
    cancel_request_batch(batch_id=batch.pk, job_ids=active)
    batch.jobs.filter(pk__in=active, cancel_requested_at__isnull=True).update(cancel_requested_at=timezone.now())
    Batch.objects.filter(pk=batch.pk, finished_at__isnull=True).update(status=BatchStatus.CANCELLED)
    jobs_end(
        jobs=batch.jobs.all(),
        error_class=ErrorClass.CANCELLED,
        message="cancelled with its batch before it started",
        expected_status=JobStatus.QUEUED,
    )
    transaction.on_commit(lambda: publish_batch_finalize(batch_id=batch.pk), robust=True)
    batch.refresh_from_db()
    logger.info("batch %s cancel requested (%s jobs were active)", batch.pk, len(active))
    return batch
