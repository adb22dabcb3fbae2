"""Submitting one job, and claiming the job a crawl message runs (a slot's in fair-share order); cancelling one is
crawls.services.cancelling. Every change of status they make is crawls.services.lifecycle's."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import redis
from django.conf import settings
from django.db.models import Model

from access.models import Requester
from crawls.fairshare import PICK_ATTEMPTS, declared_shards, fair_enabled, fair_pick, fair_served, jobs_admit_early
from crawls.models import CrawlJob
from crawls.services.lifecycle import job_claim_moved, job_claimed, jobs_create_many, shard_join
from crawls.services.validation import JobSpecsInvalid
from crawls.timeouts import SOFT_LIMIT_MARGIN
from crawls.worker.shutdown import shutdown_requested
from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_DEFAULT
from project.pools.hosted import claim_turn
from project.redis import redis_awaited

logger = logging.getLogger("trawl.jobs")
# How long a claim waits for an absent Redis: a third of what the slot's Celery soft limit leaves above the job's
# timeout, so the crawl it claims still ends before that limit.
CLAIM_PATIENCE_SECONDS = SOFT_LIMIT_MARGIN / 3


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


def job_claim_message(
    *, job_id: str, attempt: int, worker: str, shard: int = 0, slot_soft_limit: float | None = None
) -> CrawlJob | None:
    """The job a `run_crawl` message runs, claimed in its turn once Trawl's Redis answers; None when it claimed none.

    The message is a slot at its priority: the job it claims may be another requester's (job_claim_fair). A shard
    message (`shard` > 0) is not a slot: it joins its own job, a parallel one already running (a claim all the same,
    in its turn: a shard holds no later claim while it crawls).

    A crawl needs Redis from its first step: a job claimed while Redis is away is requeued at once, an attempt spent,
    and the next claim in the host's line picks that job again. So the claim waits for Redis, before its turn (a
    claim waiting in its turn would hold every later one of its process), and checks it once more in the turn; Redis
    gone by then, it waits again and claims out of turn. Past CLAIM_PATIENCE_SECONDS it claims nothing and the job
    stays queued, for the reaper to publish again."""
    deadline = time.monotonic() + min(settings.TRAWL_INFRA_PATIENCE_SECONDS, CLAIM_PATIENCE_SECONDS)
    turn = functools.partial(_redis_checked, claim_turn)
    while redis_awaited(patience=max(0.0, deadline - time.monotonic()), given_up=shutdown_requested):
        try:
            if shard:
                with turn():
                    return shard_join(job_id=job_id, attempt=attempt, shard=shard, worker=worker)
            return job_claim_fair(
                job_id=job_id, attempt=attempt, worker=worker, slot_soft_limit=slot_soft_limit, turn=turn
            )
        except _RedisAway:
            turn = functools.partial(_redis_checked, contextlib.nullcontext)  # its turn is spent
    logger.warning("job %s attempt %s shard %s not claimed: Trawl's Redis is away", job_id, attempt, shard)
    return None


class _RedisAway(Exception):
    pass


@contextmanager
def _redis_checked(turn: Callable[[], AbstractContextManager]) -> Iterator[None]:
    with turn():
        if not redis_awaited(patience=0):
            raise _RedisAway
        yield


def job_claim_fair(
    *,
    job_id: str,
    attempt: int,
    worker: str,
    slot_soft_limit: float | None = None,
    turn: Callable[[], AbstractContextManager] = contextlib.nullcontext,
) -> CrawlJob | None:
    """Claim the job this message's slot owes a turn to (crawls/fairshare.py), else the message's own job.

    `slot_soft_limit` is the message's Celery soft time limit: only a job whose timeout it covers may take the slot.
    `turn` (a crawl host's claim_turn) is held for the pick and the claim only: the slot's own job is read before it
    and the claimed one after, as every claim compares and sets (a job claimed meanwhile is picked again)."""
    own = CrawlJob.objects.filter(pk=job_id).first()
    with turn():
        claimed = _claim_fair(own, job_id=job_id, attempt=attempt, worker=worker, slot_soft_limit=slot_soft_limit)
    return job_claimed(claimed) if claimed is not None else None


def _claim_fair(
    own: CrawlJob | None, *, job_id: str, attempt: int, worker: str, slot_soft_limit: float | None
) -> str | None:
    """The id of the job this slot claimed, if any."""
    if own is None or not fair_enabled():
        return _own_claimed(job_id=job_id, attempt=attempt, worker=worker)
    try:
        for _ in range(PICK_ATTEMPTS):
            mine = own if own.attempt == attempt else None
            pick = fair_pick(priority=own.priority, own=mine, slot_soft_limit=slot_soft_limit)
            if pick is None:
                break
            if job_claim_moved(job_id=str(pick.pk), attempt=pick.attempt, worker=worker):
                _served_counted(pick)
                if pick.pk != own.pk:
                    logger.info(
                        "fair share: the slot of job %s runs job %s (requester %s)", own.pk, pick.pk, pick.requester_id
                    )
                return str(pick.pk)
            own.refresh_from_db()  # another worker took our pick: ask again
    except redis.RedisError as exc:  # the turn order lives in Redis; without it, plain submission order
        logger.warning("fair share unavailable (%s): job %s takes its own slot", exc, job_id)
    return _own_claimed(job_id=job_id, attempt=attempt, worker=worker)


def _own_claimed(*, job_id: str, attempt: int, worker: str) -> str | None:
    return job_id if job_claim_moved(job_id=job_id, attempt=attempt, worker=worker) else None


def _served_counted(job: CrawlJob) -> None:
    """The turn order's bookkeeping after a claim. The job is this slot's now whatever Redis says: a failure here
    must not send the slot on to claim another (the claimed job would stay `running` with nobody crawling it until
    the reaper took it, spending an attempt)."""
    try:
        fair_served(job=job)
    except redis.RedisError as exc:
        logger.warning("fair share: job %s not counted as served (%s); it runs anyway", job.pk, exc)
