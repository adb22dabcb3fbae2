"""A job's life: the one module that writes `CrawlJob.status` (and the fields that move with it), and the one rule
for whether a job whose attempt was cut short runs again (`attempt_verdict`).

    create ──▶ queued ──claim──▶ running ──end──▶ succeeded | failed | cancelled | dead
                  ▲                 │
                  └──attempt over───┘          (queued ──end──▶ cancelled: a cancel before the claim)

Every move is a compare-and-set from the state its caller saw (`transition`: UPDATE … WHERE status IN (expected),
plus the attempt), so a redelivered message, a late worker, a second reaper or a racing cancel finds nothing to move.
The database is the truth and the broker only transport: a job is published after the transaction that queued it
commits, and a publish that fails leaves the job queued, where the reaper publishes it again (crawls.services.reaper).
What follows a final state (source feedback, webhooks, counters, alerts, the batch's end) is crawls.services.after_end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from access.models import Requester
from crawls.fairshare import declared_shards, jobs_admit, jobs_admit_early
from crawls.models import Batch, CrawlJob, ErrorClass, JobStatus
from crawls.publish import publish_crawl, publish_crawls
from crawls.services.after_end import jobs_followups, source_feedback
from crawls.services.validation import JobSpecsInvalid, SpecChecker
from project.messaging.brokers import PRIORITY_DEFAULT
from project.redis import get_redis, hash_tag, redis_key
from registry.models import Scraper
from runtime.bridge.logcapture import job_log_flush
from runtime.bridge.tracebacks import middle_cut

logger = logging.getLogger("trawl.jobs")

MESSAGE_MAX = 4000
CREATE_BATCH_SIZE = 1000  # rows per INSERT of a bulk create


def transition(jobs: QuerySet[CrawlJob], *, expected: str | Iterable[str], **fields: Any) -> int:
    """The compare-and-set every change of status goes through: move the jobs of `jobs` still in `expected`; return
    how many moved. `jobs` names the attempt (and whatever else the caller saw) so that a stale caller moves none."""
    expected = (expected,) if isinstance(expected, str) else tuple(expected)
    return jobs.filter(status__in=expected).update(**fields)


def jobs_create_many(
    *,
    specs: list[dict[str, Any]],
    requester: Requester | None = None,
    batch: Batch | None = None,
    skip_invalid: bool = False,
) -> list[CrawlJob]:
    """Check every spec (crawls.services.validation), admit them against the requester's cap, store them queued in
    one bulk INSERT and, once that commits, publish them through one broker connection — except a batch's jobs,
    which its chord publishes (crawls.services.batch_runs).

    An invalid spec raises JobSpecsInvalid naming each one, and nothing is created; with `skip_invalid` (a dispatch
    pass: one bad source must not hold back the others) the invalid ones are logged and left out."""
    # The cap first: a submission over it is refused before its specs are checked and their names resolved.
    jobs_admit_early(requester=requester, shards=sum(declared_shards(spec) for spec in specs), jobs=len(specs))
    scrapers, errors = SpecChecker(requester=requester).check_all(specs)
    if errors and not skip_invalid:
        raise JobSpecsInvalid(errors)
    for index, error in sorted(errors.items()):
        logger.warning("job spec %s (%s) not created: %s: %s", index, specs[index].get("url"), error.field, error)
    valid = [(spec, scraper) for spec, scraper in zip(specs, scrapers, strict=True) if scraper is not None]
    with transaction.atomic():
        jobs_admit(requester=requester, shards=sum(spec.get("parallelism", 1) for spec, _ in valid), jobs=len(valid))
        jobs = CrawlJob.objects.bulk_create(
            [_new_job(spec, scraper, requester=requester, batch=batch) for spec, scraper in valid],
            batch_size=CREATE_BATCH_SIZE,
        )
        if batch is None and jobs:
            # publish_crawls never raises: a job it could not publish stays queued for the reaper.
            transaction.on_commit(lambda: publish_crawls(jobs=jobs))
    return jobs


def _new_job(spec: dict[str, Any], scraper: Scraper, *, requester: Requester | None, batch: Batch | None) -> CrawlJob:
    return CrawlJob(
        status=JobStatus.QUEUED,
        batch=batch,
        requester=requester,
        source=spec.get("source"),
        url=spec.get("url") or "",
        spider=spec.get("spider") or "",
        scraper=scraper,
        requested_version=spec.get("version") or "",
        requested_variant=spec.get("variant") or "",
        priority=spec.get("priority", PRIORITY_DEFAULT),
        callback_url=spec.get("callback_url") or "",
        options=spec.get("options") or {},
        args=spec.get("args") or {},
        parallelism=spec.get("parallelism", 1),
    )


def job_claim(*, job_id: str, attempt: int, worker: str) -> CrawlJob | None:
    """queued → running for this attempt, so a redelivered message never runs a job twice."""
    return job_claimed(job_id) if job_claim_moved(job_id=job_id, attempt=attempt, worker=worker) else None


def job_claim_moved(*, job_id: str, attempt: int, worker: str) -> bool:
    """job_claim's compare-and-set alone: a crawl host's claim turn reads the claimed job after it (job_claimed)."""
    now = timezone.now()
    running = {"status": JobStatus.RUNNING, "started_at": now, "heartbeat_at": now, "worker": worker}
    return bool(transition(CrawlJob.objects.filter(pk=job_id, attempt=attempt), expected=JobStatus.QUEUED, **running))


def job_claimed(job_id: str) -> CrawlJob:
    return CrawlJob.objects.select_related("scraper", "source").get(pk=job_id)


def shard_join(*, job_id: str, attempt: int, shard: int, worker: str) -> CrawlJob | None:
    """A shard after the first joins its job while it runs at `attempt` (shard 0 claimed it); each shard of an
    attempt runs once. The job stays `running`: a join moves no status, it only takes the shard's claim in Redis."""
    job = CrawlJob.objects.select_related("scraper", "source", "version").filter(pk=job_id).first()
    if job is None or job.status != JobStatus.RUNNING or job.attempt != attempt or not 0 < shard < job.parallelism:
        return None
    claim = redis_key("frontier", hash_tag(job_id), "claim", attempt, shard)
    if not get_redis().set(claim, worker, nx=True, ex=int(settings.TRAWL_FRONTIER_TTL_SECONDS)):
        return None
    return job


class AttemptCause(StrEnum):
    """Why a running attempt stopped short of an outcome of its own: the causes that may give a job another go."""

    WORKER_LOST = "worker_lost"  # the reaper found its heartbeat stale: SIGKILL, OOM, a node gone
    WARM_SHUTDOWN = "warm_shutdown"  # its worker got SIGTERM (a rolling update) and handed the crawl back
    INFRASTRUCTURE = "infrastructure"  # Trawl's own Redis or database failed under it, not the site nor the worker
    FRONTIER_LOST = "frontier_lost"  # Redis lost the job's frontier: the next attempt starts again on a fresh one
    # Its crawl held the process's reactor past TRAWL_REACTOR_STALL_SECONDS (runtime.bridge.watchdog): the process
    # was replaced. Spider code or requester input that does it again must not run forever.
    REACTOR_STALLED = "reactor_stalled"
    PROCESS_RECYCLED = "process_recycled"  # another crawl of its process stalled the reactor: not this job's doing
    # Its process grew past worker_max_memory_per_child and handed every crawl back (project.pools.hosted). Which
    # crawl grew it is not known: each spends an attempt, so a job that does it on every attempt ends.
    MEMORY_RECYCLED = "memory_recycled"


@dataclass(frozen=True)
class AttemptVerdict:
    """What follows an attempt: another one (`spends_attempt`: it counts against `max_attempts`), or the job's
    end with `error_class`."""

    again: bool
    spends_attempt: bool = True
    error_class: str = ""


# Which causes spend an attempt, and which end the job once it has had `max_attempts`. A lost worker and a stalled
# reactor do both (the job that stalls every process it runs in ends `failed` / `reactor_stalled`): Trawl's own
# faults and a bystander of another crawl's stall are never the job's (they give it one more attempt), and a warm
# shutdown is the operator's, so it spends an attempt but never ends a job: a rolling update must not kill crawls,
# and a job handed back past its last attempt ends `dead` only if a later attempt loses its worker too.
SPENDS_ATTEMPT = {
    AttemptCause.WORKER_LOST: True,
    AttemptCause.WARM_SHUTDOWN: True,
    AttemptCause.INFRASTRUCTURE: False,
    AttemptCause.FRONTIER_LOST: False,
    AttemptCause.REACTOR_STALLED: True,
    AttemptCause.PROCESS_RECYCLED: False,
    AttemptCause.MEMORY_RECYCLED: True,
}
ENDS_AFTER_LAST_ATTEMPT = {
    AttemptCause.WORKER_LOST: ErrorClass.WORKER_LOST,
    AttemptCause.REACTOR_STALLED: ErrorClass.REACTOR_STALLED,
    AttemptCause.MEMORY_RECYCLED: ErrorClass.MEMORY_EXCEEDED,
}


def attempt_verdict(*, cause: AttemptCause, attempt: int, max_attempts: int) -> AttemptVerdict:
    """The one rule for whether a job that lost its attempt to `cause` runs again: pure, so the reaper, the worker's
    own hand-back and a warm shutdown all ask it rather than decide."""
    error_class = ENDS_AFTER_LAST_ATTEMPT.get(cause)
    if error_class and attempt >= max_attempts:
        return AttemptVerdict(again=False, spends_attempt=False, error_class=error_class)
    return AttemptVerdict(again=True, spends_attempt=SPENDS_ATTEMPT[cause])


def job_attempt_over(
    *, job: CrawlJob, cause: AttemptCause, reason: str, end_message: str = "", only_if: Q | None = None
) -> CrawlJob | None:
    """This running attempt stopped for `cause`: the job runs again as a new attempt, or ends (with `end_message`,
    else `reason`), as attempt_verdict says. `only_if` narrows the compare-and-set (the reaper's: the heartbeat is
    still stale). None if the job was no longer running at this attempt."""
    verdict = attempt_verdict(cause=cause, attempt=job.attempt, max_attempts=job.max_attempts)
    if verdict.again:
        return _job_next_attempt(job=job, reason=reason, spends_attempt=verdict.spends_attempt, only_if=only_if)
    ended = jobs_end(
        jobs=CrawlJob.objects.filter(only_if or Q(), pk=job.pk, attempt=job.attempt),
        error_class=verdict.error_class,
        message=end_message or reason,
    )
    return ended[0] if ended else None


def _job_next_attempt(*, job: CrawlJob, reason: str, spends_attempt: bool, only_if: Q | None) -> CrawlJob | None:
    """running → queued as a new attempt (the old attempt's messages can no longer claim it), published again; one
    that does not spend an attempt raises `max_attempts` with it. A publish that fails (the broker is away) is
    logged: the job stays queued and the reaper publishes it again."""
    fields: dict[str, Any] = dict(status=JobStatus.QUEUED, attempt=job.attempt + 1, worker="", heartbeat_at=None)
    if not spends_attempt:
        fields["max_attempts"] = job.max_attempts + 1
    running = CrawlJob.objects.filter(only_if or Q(), pk=job.pk, attempt=job.attempt)
    if not transition(running, expected=JobStatus.RUNNING, **fields):
        return None
    logger.warning("job %s attempt %s requeued as attempt %s: %s", job.pk, job.attempt, job.attempt + 1, reason)
    requeued = CrawlJob.objects.select_related("scraper", "version").get(pk=job.pk)
    try:
        publish_crawl(job=requeued)
    except Exception as exc:  # the broker is away: the job is queued in the database, where the reaper finds it
        logger.warning("job %s: requeue not published (%s); the reaper will", job.pk, exc)
    return requeued


def job_end(
    *,
    job: CrawlJob,
    error_class: str = "",
    message: str = "",
    stats: dict[str, Any] | None = None,
    alerts: list[dict[str, Any]] | None = None,
    expected_status: str = JobStatus.RUNNING,
) -> CrawlJob | None:
    """End the job if it is still in `expected_status` at `job.attempt`; None if someone else got there first.
    `alerts`: the monitor breaches its crawl found (crawls.services.monitoring), stored with the final state."""
    job_log_flush()  # this process may be running the job: its log readable before its final status is
    ended = jobs_end(
        jobs=CrawlJob.objects.filter(pk=job.pk, attempt=job.attempt),
        error_class=error_class,
        message=message,
        stats=stats,
        alerts=alerts,
        expected_status=expected_status,
    )
    if not ended:
        logger.warning("job %s attempt %s no longer %s; outcome dropped", job.pk, job.attempt, expected_status)
        return None
    job_log_flush()  # and the `job finish` line its follow-ups logged, for `crawl --wait --log`
    return ended[0]


def final_status(error_class: str) -> JobStatus:
    """A job without an error class succeeded; `cancelled` and `worker_lost` have statuses of their own."""
    if not error_class:
        return JobStatus.SUCCEEDED
    if error_class == ErrorClass.CANCELLED:
        return JobStatus.CANCELLED
    if error_class == ErrorClass.WORKER_LOST:
        return JobStatus.DEAD
    return JobStatus.FAILED


def jobs_end(
    *,
    jobs: QuerySet[CrawlJob],
    error_class: str = "",
    message: str = "",
    stats: dict[str, Any] | None = None,
    alerts: list[dict[str, Any]] | None = None,
    expected_status: str = JobStatus.RUNNING,
) -> list[CrawlJob]:
    """End every job of `jobs` still in `expected_status`, each by its own compare-and-set; return those ended.

    The source's feedback commits with the final state; the other follow-ups run once it is committed."""
    fields: dict[str, Any] = {
        "status": final_status(error_class),
        "error_class": error_class,
        # Cut in the middle: a spider's traceback ends with its exception and the spider's own line.
        "error_message": middle_cut(message, max_chars=MESSAGE_MAX),
        "finished_at": timezone.now(),
    }
    if stats is not None:
        fields["stats"] = stats
    if alerts is not None:
        fields["alerts"] = alerts
    with transaction.atomic():
        ended_ids = [
            job_id
            for job_id, attempt in jobs.filter(status=expected_status).values_list("id", "attempt")
            if transition(CrawlJob.objects.filter(pk=job_id, attempt=attempt), expected=expected_status, **fields)
        ]
        ended = list(CrawlJob.objects.filter(pk__in=ended_ids).select_related("scraper", "source", "version"))
        for job in ended:
            source_feedback(job)
        if ended:
            transaction.on_commit(lambda: jobs_followups(jobs=ended))
    return ended
