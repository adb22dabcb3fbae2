"""Durable and parallel runs of one job: its shards, their shared frontier, their summed stats, a warm requeue.

A job with `parallelism: N` runs as N `run_crawl` tasks of one attempt: shard 0 claims the job (queued → running)
and publishes shards 1..N-1, which join while the job is running at that attempt (claim and join are
crawls.services.lifecycle's). Every shard crawls from the job's frontier in Redis (runtime.frontier). A shard that
finds the queue empty and nothing in flight anywhere leaves; the last to leave ends the job through `job_end`, with
the stats of every shard of every attempt summed. Any other way a shard stops (cancel, timeout, a watchdog, a
crash) ends the job for all: the others see it at their next heartbeat.

Shard 0 opens the frontier before it publishes the others: it joins the frontier an earlier attempt left, or creates
a fresh one (a new epoch, runtime.frontier.leases) when there is none, say after Redis lost it; the crawl then starts
again from its start URL. The other shards only join: one that finds no frontier never recreates it while the rest
still work. A shard that finds its frontier lost raises FrontierLost, and the job is requeued to start again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from crawls.models import CrawlJob
from crawls.publish import publish_shards
from crawls.services.lifecycle import AttemptCause, job_attempt_over
from runtime.frontier import DUPEFILTER, SCHEDULER, Frontier, FrontierLost

logger = logging.getLogger("trawl.jobs")

SAMPLE_KEEP = 5  # list values (invalid_sample) kept when summing
FINAL = "final"  # in a shard's progress snapshot once its crawl is over
FINAL_WAIT_SECONDS = 5.0  # how long the last shard waits for the others' final numbers (a dead one never sends them)
FINAL_POLL_SECONDS = 0.05


def frontier_settings(*, job_id: str, attempt: int, shard: int, epoch: str = "") -> dict[str, Any]:
    """The Scrapy settings that make a crawl one shard of a job's frontier in Redis (`epoch`: the frontier's, as its
    task opened it; without one the crawl's scheduler opens it)."""
    spec = {"job": job_id, "attempt": attempt, "shard": shard, "epoch": epoch}
    return {"SCHEDULER": SCHEDULER, "DUPEFILTER_CLASS": DUPEFILTER, "TRAWL_FRONTIER": spec}


def job_frontier(job_id: object, **shard: Any) -> Frontier:
    """A job's frontier as one shard sees it (Frontier's `attempt`, `shard`, `epoch`), on the project's timing."""
    return Frontier(
        job_id,
        ttl_seconds=settings.TRAWL_FRONTIER_TTL_SECONDS,
        lease_seconds=settings.TRAWL_FRONTIER_LEASE_SECONDS,
        **shard,
    )


class Shard:
    """One shard of one attempt, as the task thread sees it: acknowledgements, progress, the end."""

    def __init__(self, job: CrawlJob, *, index: int = 0) -> None:
        self.job = job
        self.index = index
        self.frontier = job_frontier(job.pk, attempt=job.attempt, shard=index)

    def scrapy_settings(self) -> dict[str, Any]:
        """The crawl's frontier settings, once the frontier is open: shard 0 may create it, the others only join it
        (FrontierLost if it is gone). Before the other shards are published, so they find it."""
        epoch = self.frontier.open(create=self.index == 0)
        # This shard's numbers recorded from its start (empty): the last shard to leave waits for the final numbers
        # of every shard it finds recorded (others_final), and this one may end before its first tick records any.
        self.frontier.stored(0, progress={})
        return frontier_settings(job_id=str(self.job.pk), attempt=self.job.attempt, shard=self.index, epoch=epoch)

    def check_intact(self, crawl_stats: dict[str, Any]) -> None:
        """Raise FrontierLost if this shard's task or its crawl found the job's frontier gone: what it fetched is a
        part of the site, and the job must start again (never end `succeeded` on it)."""
        if self.frontier.lost or crawl_stats.get("frontier/lost"):
            raise FrontierLost(f"the frontier of job {self.job.pk} is gone from Redis (emptied or restarted empty)")

    def publish_others(self) -> None:
        if self.index == 0 and self.job.parallelism > 1:
            publish_shards(job=self.job, shards=range(1, self.job.parallelism))

    def total(self, progress: dict[str, Any], *, final: bool = False) -> dict[str, Any]:
        """This shard's `progress` recorded (`final` once its crawl is over), summed with every other shard's and
        earlier attempts'. FrontierLost if the frontier is gone: the final total is the job's last look at it before
        its outcome, and a frontier whose last look finds it intact was whole when the crawl ended."""
        self.frontier.stored(0, progress={**progress, FINAL: True} if final else progress)
        snapshots = self.frontier.progress()
        summed = stats_sum(snapshots.values())
        summed.pop(FINAL, None)
        return {
            **summed,
            "attempts": self.job.attempt,
            "shards": self.job.parallelism,
            # How the work spread: pages fetched by each `<attempt>:<shard>`.
            "pages_by_shard": {member: snapshot.get("pages", 0) for member, snapshot in sorted(snapshots.items())},
        }

    def others_final(self, *, progress: dict[str, Any], timeout: float = FINAL_WAIT_SECONDS) -> bool:
        """The shard that ends the job waits (bounded) for this attempt's other shards to record their final numbers:
        they left the frontier with every item stored, but the stats of their last pages come as their tasks end.
        This shard's own `progress` is recorded final first: shards that a job's bound closed together wait for each
        other."""
        self.frontier.stored(0, progress={**progress, FINAL: True})
        deadline = time.monotonic() + timeout
        while True:
            snapshots = self.frontier.progress()
            waiting = [
                member
                for member, snapshot in snapshots.items()
                if member != self.frontier.member
                and member.startswith(f"{self.job.attempt}:")
                and not snapshot.get(FINAL)
            ]
            if not waiting:
                return True
            if time.monotonic() >= deadline:  # a shard that died after leaving: its last snapshot is what there is
                logger.warning("job %s: shard(s) %s recorded no final stats", self.job.pk, ", ".join(waiting))
                return False
            time.sleep(FINAL_POLL_SECONDS)

    def stall_counted(self, counted: str) -> dict[str, Any]:
        """`counted` (`reactor_stalls`, `process_recycled`) + 1 in this attempt's numbers, which every later total
        sums; the job's stats with it."""
        snapshot = self.frontier.progress().get(self.frontier.member, {})
        return self.total({**snapshot, counted: snapshot.get(counted, 0) + 1})

    def requeue_now(self, *, memory: bool = False, suspect: bool = True) -> CrawlJob | None:
        """Warm shutdown, or the process past its memory bound (`memory`; `suspect`: this crawl grew it, as far as
        project.pools.memory could tell): hand this shard's requests back and give the job a new attempt for another
        worker, or end it (attempt_verdict); the job as it is then (None: this attempt no longer ran it)."""
        returned = self.frontier.release()
        if not memory:
            reason = f"worker shutting down; shard {self.index} handed {returned} request(s) back to the frontier"
            return job_attempt_over(job=self.job, cause=AttemptCause.WARM_SHUTDOWN, reason=reason)
        if not suspect:
            reason = f"another crawl of its process grew it past its memory bound; {returned} request(s) handed back"
            return job_attempt_over(job=self.job, cause=AttemptCause.PROCESS_RECYCLED, reason=reason)
        reason = f"its process grew past its memory bound; shard {self.index} handed {returned} request(s) back"
        end_message = (
            f"its process grew past its memory bound (worker_max_memory_per_child) on each of its {self.job.attempt} "
            "attempts: the crawl holds more than a crawl process may"
        )
        return job_attempt_over(
            job=self.job, cause=AttemptCause.MEMORY_RECYCLED, reason=reason, end_message=end_message
        )


def stats_sum(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Numbers add up (nested dicts too), lists are joined (first few kept), anything else: the last one wins."""
    total: dict[str, Any] = {}
    for snapshot in snapshots:
        _add(total, snapshot)
    return total


def _add(total: dict[str, Any], snapshot: dict[str, Any]) -> None:
    for key, value in snapshot.items():
        current = total.get(key)
        if isinstance(value, bool) or value is None:
            total[key] = value
        elif isinstance(value, (int, float)) and isinstance(current, (int, float)) and not isinstance(current, bool):
            total[key] = current + value
        elif isinstance(value, dict):
            total[key] = current if isinstance(current, dict) else {}
            _add(total[key], value)
        elif isinstance(value, list) and isinstance(current, list):
            total[key] = (current + value)[:SAMPLE_KEEP]
        elif value != "" or key not in total:
            total[key] = value
