"""Submitting one job and claiming a slot's job in fair-share order (cancelling one is crawls.services.cancelling).
Every change of status they make is crawls.services.lifecycle's."""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.conf import settings
from django.db.models import Model

from access.models import Requester
from crawls.fairshare import PICK_ATTEMPTS, declared_shards, fair_enabled, fair_pick, fair_served, jobs_admit_early
from crawls.models import CrawlJob
from crawls.services.lifecycle import job_claim, jobs_create_many
from crawls.services.validation import JobSpecsInvalid
from project.errors import TrawlError
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


def submission_precheck(*, requester: Requester, specs: Any) -> None:
    """Before any slow work on a submission (validating thousands of specs, resolving their names), from the raw
    specs: a batch's size (400) and the requester's cap (429). Both are checked again as the jobs are created."""
    if not isinstance(specs, list):
        return  # not a list of specs: the serializer says what is wrong
    limit = settings.TRAWL_BATCH_MAX_JOBS
    if len(specs) > limit:
        raise TrawlError(f"A batch holds at most {limit} jobs, got {len(specs)}.", field="jobs")
    jobs_admit_early(requester=requester, shards=sum(declared_shards(spec) for spec in specs), jobs=len(specs))


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
                _served_counted(claimed)
                if claimed.pk != own.pk:
                    logger.info(
                        "fair share: the slot of job %s runs job %s (requester %s)", own.pk, pick.pk, pick.requester_id
                    )
                return claimed
            own.refresh_from_db()  # another worker took our pick: ask again
    except redis.RedisError as exc:  # the turn order lives in Redis; without it, plain submission order
        logger.warning("fair share unavailable (%s): job %s takes its own slot", exc, job_id)
    return job_claim(job_id=job_id, attempt=attempt, worker=worker)


def _served_counted(job: CrawlJob) -> None:
    """The turn order's bookkeeping after a claim. The job is this slot's now whatever Redis says: a failure here
    must not send the slot on to claim another (the claimed job would stay `running` with nobody crawling it until
    the reaper took it, spending an attempt)."""
    try:
        fair_served(job=job)
    except redis.RedisError as exc:
        logger.warning("fair share: job %s not counted as served (%s); it runs anyway", job.pk, exc)
