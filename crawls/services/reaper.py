"""The job reaper: the database is the truth, the broker only transport, so no job stays `running` or `queued`
forever because a worker died or a broker message was lost.

- A running job whose heartbeat is older than TRAWL_REAPER_STALE_SECONDS, and whose attempt's liveness beat in Redis
  (crawls.live.beats) is gone too, lost its worker (SIGKILL, OOM, node gone).
  It goes back to `queued` with attempt + 1 and is published again; the old message, if the broker redelivers it,
  carries the old attempt and cannot claim. After its last attempt it ends `dead` with `worker_lost` instead, as
  crawls.services.lifecycle.attempt_verdict decides for a lost worker.
- A queued job nobody claimed within TRAWL_REAPER_QUEUED_SECONDS is published again with the same attempt (a
  publish failed, a message was purged); a Redis key makes that at most once per that period. The claim dedupes.
- Redis restarted (its run id changed, or the marker key holding it is gone: it came back empty): every job queued
  before the server started lost its message, and is published again on this pass, not after the grace.

Every change is a compare-and-set on (status, attempt, heartbeat), so a worker that heartbeats at the last moment
keeps its job, and two reapers never requeue a job twice.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from crawls.live.beats import beats_alive
from crawls.models import BatchStatus, CrawlJob, JobStatus
from crawls.publish import publish_crawl
from crawls.services.lifecycle import AttemptCause, job_attempt_over
from project.redis import get_redis, hash_tag, redis_key

logger = logging.getLogger("trawl.reaper")


def jobs_reap(*, now=None) -> dict[str, int]:
    """One pass: requeue or bury running jobs with a stale heartbeat, republish queued jobs never claimed."""
    now = now or timezone.now()
    requeued, dead = _reap_stale(now=now)
    lost_before = redis_restarted_at(now=now)
    republished = _republish_unclaimed(now=now, queued_before=lost_before)
    return {"requeued": requeued, "dead": dead, "republished": republished}


def redis_restarted_at(*, now) -> object | None:
    """When Redis last started, if it restarted since the previous pass (else None).

    The server's run id is kept in a marker key: a missing marker (Redis came back empty) or another run id (it
    restarted with its data) means a restart. Messages published before that moment may be gone."""
    client = get_redis()
    server = client.info("server")
    marker = redis_key("reaper", "redis-run-id")
    previous = client.set(marker, server["run_id"], get=True)
    if previous == server["run_id"]:
        return None
    started = now - timedelta(seconds=int(server.get("uptime_in_seconds", 0)))
    if previous is not None or CrawlJob.objects.filter(status=JobStatus.QUEUED, queued_at__lt=started).exists():
        logger.warning("redis restarted at %s (run id %s): republishing the jobs queued before", started, previous)
    return started


def _reap_stale(*, now) -> tuple[int, int]:
    stale_for = settings.TRAWL_REAPER_STALE_SECONDS
    cutoff = now - timedelta(seconds=stale_for)
    stale_q = Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    stale = CrawlJob.objects.filter(stale_q, status=JobStatus.RUNNING).only("id", "attempt", "max_attempts")
    candidates = list(stale[: settings.TRAWL_REAPER_MAX_PER_PASS])
    # A slow tick leaves the row's heartbeat old while the attempt's own thread still beats in Redis: alive.
    beating = beats_alive([(job.pk, job.attempt) for job in candidates])
    requeued = dead = 0
    for job in (job for job in candidates if str(job.pk) not in beating):
        after = job_attempt_over(
            job=job,
            cause=AttemptCause.WORKER_LOST,
            reason="its worker was lost (no heartbeat)",
            end_message=f"worker lost on the last attempt ({job.attempt}): no heartbeat for over {stale_for:.0f}s",
            only_if=stale_q,
        )
        if after is None:  # it heartbeat at the last moment, or another reaper got there first
            continue
        if after.attempt > job.attempt:  # a new attempt
            requeued += 1
        else:
            logger.warning("job %s lost its worker on its last attempt (%s); ended dead", job.pk, job.attempt)
            dead += 1
    return requeued, dead


def _republish_unclaimed(*, now, queued_before=None) -> int:
    grace = settings.TRAWL_REAPER_QUEUED_SECONDS
    cutoff = now - timedelta(seconds=grace)
    restarted = queued_before is not None and queued_before > cutoff
    waiting = (
        CrawlJob.objects.filter(status=JobStatus.QUEUED, queued_at__lt=queued_before if restarted else cutoff)
        # A batch still being launched is the batch sweeper's to relaunch.
        .exclude(batch__status=BatchStatus.PENDING)
        .order_by("queued_at")
    )
    redis, republished = get_redis(), 0
    for job in waiting.select_related("scraper", "version")[: settings.TRAWL_REAPER_MAX_PER_PASS]:
        # At most once per grace period per job, so a long backlog is not flooded with copies (after a restart the
        # keys are gone with everything else: each lost job is published once more).
        if redis.set(redis_key("reaper", "republished", hash_tag(job.pk)), "1", nx=True, ex=max(1, int(grace))):
            publish_crawl(job=job)
            republished += 1
    if republished:
        why = "queued before redis restarted" if restarted else f"not claimed within {grace}s"
        logger.warning("republished %s queued job(s) %s", republished, why)
    return republished
