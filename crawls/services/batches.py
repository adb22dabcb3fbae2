"""Batches: many jobs submitted at once, checked together (nothing created if one is bad).

Launching, finalizing and sweeping them is crawls.services.batch_runs, cancelling them crawls.services.cancelling;
every change of a batch's status is crawls.services.batch_lifecycle's.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction

from access.models import Requester
from crawls.models import Batch
from crawls.publish import publish_batch_launch
from crawls.services.batch_lifecycle import batch_open
from crawls.services.lifecycle import jobs_create_many
from crawls.services.validation import JobSpecsInvalid, validate_crawl_url
from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_DEFAULT
from project.net.bounded import target_check_within
from project.validators import priority_check

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
    priority: int = PRIORITY_DEFAULT,
    callback_url: str = "",
) -> Batch:
    """Check every job spec first (nothing is created if one is bad), store the batch and its jobs queued, and
    queue the launcher task that publishes the chord once this commits. Job specs default to the batch priority."""
    if not jobs:
        raise TrawlError("a batch needs at least one job", field="jobs")
    if len(jobs) > settings.TRAWL_BATCH_MAX_JOBS:
        raise TrawlError(f"a batch holds at most {settings.TRAWL_BATCH_MAX_JOBS} jobs, got {len(jobs)}", field="jobs")
    priority_check(priority)
    if callback_url:
        validate_crawl_url(callback_url, field="callback_url")
        target_check_within(callback_url, field="callback_url")
    batch = batch_open(requester=requester, name=name, priority=priority, callback_url=callback_url, total=len(jobs))
    try:
        jobs_create_many(specs=[{"priority": priority, **spec} for spec in jobs], requester=requester, batch=batch)
    except JobSpecsInvalid as exc:  # the transaction rolls back: the batch is not created either
        errors = {index: {error.field or "detail": [error.message]} for index, error in exc.errors.items()}
        raise BatchSpecError(errors) from None
    # robust: if the broker is away the batch stays `pending` and the sweeper launches it after the grace.
    transaction.on_commit(lambda: publish_batch_launch(batch=batch), robust=True)
    logger.info("batch %s created with %s jobs by %s", batch.pk, batch.total, requester)
    return batch
