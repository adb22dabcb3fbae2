"""Fair share between requesters: a cap on each one's active jobs, and round-robin among them at one priority.

Cap: a requester's `max_active_jobs` (else TRAWL_DEFAULT_MAX_ACTIVE_JOBS) bounds its queued + running shards: a job
with `parallelism: N` takes N worker slots, so it counts N. A submission that would pass it (a batch counts all its
jobs' parallelism) is refused with 429 before anything is created.

Round-robin: a `run_crawl` message is a worker slot at its priority step, not an order to run that one job. The
worker that takes it runs the next job of the requester that is owed one at that step: the requester with the fewest
shards running, then the one served longest ago (a mark per step in Redis). So a 5,000-job batch queued first no
longer holds back another requester's ten jobs at the same priority: they start in the next few slots. Every queued
job still has its own message, so every job still runs: a message whose own job was already taken by another slot
simply runs someone else's. Higher priorities still overtake lower ones (slots never cross priority steps), a shard
message (`shard` kwarg, one more worker on a running job) is never a slot, and a job is only moved into a slot whose
Celery time limits cover its own timeout. See docs/fair-share.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import Coalesce

from access.models import Requester
from access.selectors import requester_shard_cap
from crawls.models import ACTIVE_STATUSES, CrawlJob, JobStatus
from crawls.timeouts import celery_time_limits, job_timeout
from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_MAX, PRIORITY_MIN
from project.messaging.messages import priority_step
from project.redis import LuaScript, get_redis, redis_key

logger = logging.getLogger("trawl.fairshare")

PICK_ATTEMPTS = 5  # claims lost to other workers before a slot falls back to its own job
SYSTEM = "system"  # scheduled and admin work without a requester counts as one requester
SERVED_TTL = 86400
# When a requester was last served at a step: Redis's clock in microseconds, never below the step's last mark + 1
# (kept in the hash's `~last`), so one round trip within a crawl host's claim turn orders the step's claims as a
# shared counter did in two. Only marks of one step's hash, so of one Redis node, are ever compared.
SERVED_MARK = LuaScript(
    "local t = redis.call('TIME') "
    "local last = tonumber(redis.call('HGET', KEYS[1], '~last')) or 0 "
    "local mark = string.format('%.0f', math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), last + 1)) "
    "redis.call('HSET', KEYS[1], ARGV[1], mark, '~last', mark) "
    "redis.call('EXPIRE', KEYS[1], ARGV[2]) return mark"
)


def jobs_admit(*, requester: Requester | None, shards: int, jobs: int = 1) -> None:
    """Refuse (429) a submission of `jobs` jobs with `shards` shards in all (their parallelism summed) that would take
    `requester` past its cap (access.selectors.requester_shard_cap: its max_active_jobs, else the default).

    Call inside the transaction that creates the jobs: the requester's row is locked (and read again, so a cap an
    admin just changed counts), so two submissions racing each other are counted one after the other."""
    if requester is None:
        return  # the system tenant: scheduled and admin work
    locked = Requester.objects.select_for_update().only("name", "is_admin", "max_active_jobs").get(pk=requester.pk)
    _admit(locked, shards=shards, jobs=jobs)


def jobs_admit_early(*, requester: Requester | None, shards: int, jobs: int = 1) -> None:
    """`jobs_admit` without the lock, before any slow work on a submission (checking thousands of specs, resolving
    their names): what is over the cap now is refused at once. `jobs_admit` still decides, locked, at creation."""
    if requester is not None:
        _admit(requester, shards=shards, jobs=jobs)


def _admit(requester: Requester, *, shards: int, jobs: int) -> None:
    limit = requester_shard_cap(requester=requester)
    if limit is None:
        return
    active = active_shards(requester_id=requester.pk)
    if active + shards > limit:
        added = f"{shards}" if shards == jobs else f"{shards} (its {jobs} job(s)' parallelism summed)"
        raise TrawlError(
            f"requester {requester.name} may have at most {limit} active jobs (max_active_jobs: queued + running, a "
            f"job with parallelism N counting N); it has {active} and this submission adds {added}. Wait for some to "
            "finish or ask an admin to raise it",
            status_code=429,
        )


def declared_shards(spec: object) -> int:
    """The shards a raw job spec asks for (its `parallelism` when valid, else 1: checking it comes later)."""
    parallelism = spec.get("parallelism", 1) if isinstance(spec, dict) else 1
    valid = isinstance(parallelism, int) and not isinstance(parallelism, bool)
    return parallelism if valid and 1 <= parallelism <= settings.TRAWL_MAX_PARALLELISM else 1


def active_shards(*, requester_id: int) -> int:
    """A requester's queued + running jobs, each counted as many times as its parallelism (its worker slots)."""
    active = CrawlJob.objects.filter(requester_id=requester_id, status__in=ACTIVE_STATUSES)
    return active.aggregate(shards=Coalesce(Sum("parallelism"), 0))["shards"]


def step_priorities(step: int) -> tuple[int, int]:
    """The Trawl priorities that share broker priority step `step`: the broker cannot tell them apart."""
    inside = [priority for priority in range(PRIORITY_MIN, PRIORITY_MAX + 1) if priority_step(priority) == step]
    return min(inside), max(inside)


def _served_key(step: int) -> str:
    # Not `served`, the hash of the counter's turns these marks replace: a worker of either kind reads its own.
    return redis_key("fairshare", "served_at", step)


def fair_pick(*, priority: int, own: CrawlJob | None, slot_soft_limit: float | None) -> CrawlJob | None:
    """The queued job the slot of a message at `priority` should run: the owed requester's oldest at that step."""
    step = priority_step(priority)
    low, high = step_priorities(step)
    queued = CrawlJob.objects.filter(status=JobStatus.QUEUED, priority__gte=low, priority__lte=high)
    # Without the model's ordering, which DISTINCT would add to its columns: a row per requester, not per queued job.
    owners = set(queued.order_by().values_list("requester_id", flat=True).distinct())
    if not owners:
        return None
    order = sorted(owners, key=_owed_order(owners, step)) if len(owners) > 1 else owners  # one: nobody to weigh
    for owner in order:
        if own is not None and own.status == JobStatus.QUEUED and own.requester_id == owner:
            return own  # the slot's own job is the owed one: no swap
        candidates = queued.filter(requester_id=owner) if owner is not None else queued.filter(requester__isnull=True)
        job = candidates.select_related("scraper", "version").order_by("-priority", "queued_at", "id").first()
        if job is not None and _fits(job, slot_soft_limit):
            return job
    return None


def _owed_order(owners: set[int | None], step: int) -> Callable[[int | None], tuple[int, int, bool, int]]:
    """The sort key of requesters with queued jobs at `step`: fewest shards running, then served longest ago."""
    # Shards, not jobs: a requester running one parallelism-32 job holds 32 worker slots, not one.
    running = dict(
        CrawlJob.objects.filter(status=JobStatus.RUNNING, requester_id__in=owners - {None})
        .values_list("requester_id")
        .annotate(n=Sum("parallelism"))
    )
    if None in owners:
        system = CrawlJob.objects.filter(status=JobStatus.RUNNING, requester_id__isnull=True)
        running[None] = system.aggregate(n=Coalesce(Sum("parallelism"), 0))["n"]
    served = get_redis().hgetall(_served_key(step))

    def owed(owner: int | None) -> tuple[int, int, bool, int]:
        name = SYSTEM if owner is None else str(owner)
        # Ties go to the oldest requester (the system tenant first): by id as a number, not as text ("10" < "9").
        return running.get(owner, 0), int(served.get(name, 0)), owner is not None, owner or 0

    return owed


def _fits(job: CrawlJob, slot_soft_limit: float | None) -> bool:
    """A slot's Celery time limits were set for its own job: only a job whose timeout they cover may take it."""
    return slot_soft_limit is None or celery_time_limits(job_timeout(job))[0] <= slot_soft_limit


def fair_served(*, job: CrawlJob) -> None:
    """Note that `job`'s requester was just served at its priority step (round-robin order)."""
    step = priority_step(job.priority)
    owner = SYSTEM if job.requester_id is None else str(job.requester_id)
    SERVED_MARK.run(get_redis(), [_served_key(step)], [owner, SERVED_TTL])


def fair_enabled() -> bool:
    return bool(settings.TRAWL_FAIR_SHARE)
