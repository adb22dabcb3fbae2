"""Submitting one job and claiming a slot's job in fair-share order (cancelling one is crawls.services.cancelling).
Every change of status they make is crawls.services.lifecycle's."""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.db.models import Model

from access.models import Requester
from crawls.fairshare import PICK_ATTEMPTS, fair_enabled, fair_pick, fair_served
from crawls.models import CrawlJob
from crawls.services.lifecycle import job_claim, jobs_create_many
from crawls.services.validation import JobSpecsInvalid
from project.messaging.brokers import PRIORITY_DEFAULT

logger = logging.getLogger("trawl.jobs")


def job_create(
    *,
    url: str = "",
    spider: str = "",
    scraper: str = "",
    version: str = "",
    variant: str = "",
    priority: int = PRIORITY_DEFAULT,
    requester: Requester | None = None,
    callback_url: str = "",
    options: dict[str, Any] | None = None,
    args: dict[str, str] | None = None,
    source: Model | None = None,  # a sources.Source: crawls sits below sources and does not import it
    parallelism: int = 1,
) -> CrawlJob:
    """Validate a job request, store it queued and publish it once the transaction commits. Raises TrawlError
    naming the field."""
    spec = {
        "url": url,
        "spider": spider,
        "scraper": scraper,
        "version": version,
        "variant": variant,
        "priority": priority,
        "callback_url": callback_url,
        "options": options,
        "args": args,
        "source": source,
        "parallelism": parallelism,
    }
    try:
        return jobs_create_many(specs=[spec], requester=requester)[0]
    except JobSpecsInvalid as exc:
        raise exc.errors[0] from None


def job_claim_fair(*, job_id: str, attempt: int, worker: str, slot_soft_limit: float | None = None) -> CrawlJob | None:
    """Claim the job this message's slot owes a turn to (crawls/fairshare.py), else the message's own job.

    `slot_soft_limit` is the message's Celery soft time limit: only a job whose timeout it covers may take the slot."""
    own = CrawlJob.objects.filter(pk=job_id).first()
    if own is None or not fair_enabled():
        return job_claim(job_id=job_id, attempt=attempt, worker=worker)
    try:
        for _ in range(PICK_ATTEMPTS):
            mine = own if own.attempt == attempt else None
            pick = fair_pick(priority=own.priority, own=mine, slot_soft_limit=slot_soft_limit)
            if pick is None:
                break
            claimed = job_claim(job_id=str(pick.pk), attempt=pick.attempt, worker=worker)
            if claimed is not None:
                fair_served(job=claimed)
                if claimed.pk != own.pk:
                    logger.info(
                        "fair share: the slot of job %s runs job %s (requester %s)", own.pk, pick.pk, pick.requester_id
                    )
                return claimed
            own.refresh_from_db()  # another worker took our pick: ask again
    except redis.RedisError as exc:  # the turn order lives in Redis; without it, plain submission order
        logger.warning("fair share unavailable (%s): job %s takes its own slot", exc, job_id)
    return job_claim(job_id=job_id, attempt=attempt, worker=worker)
