"""The chaos driver's faults, each one injected, undone, and timed: how long the dependency was away, and how long
from its return to the next sign of progress (a page fetched by any crawl, or one more job final)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from dataclasses import asdict, dataclass

from django.db import close_old_connections, connection

from crawls.models import CrawlJob
from tests.callbacks.harness import kill_hard

KINDS = ("redis_empty", "redis_aof", "postgres", "crawl_worker", "ops_worker")
FINAL = ("succeeded", "failed", "cancelled", "dead")
RECOVERY_LIMIT = 180  # seconds without any progress after a fault: the stack did not recover (reported, not asserted)


@dataclass
class Fault:
    kind: str
    detail: str
    at_seconds: float  # since the workload was submitted
    pages_before: int  # pages fetched by all crawls when it struck
    down_seconds: float
    recovery_seconds: float | None  # None: nothing was left to do, or nothing moved within RECOVERY_LIMIT
    idle: bool  # every job had ended: nothing left to recover


def final_jobs() -> int | None:
    """How many jobs are final, or None while the database is away (the driver must not die of it either)."""
    try:
        close_old_connections()
        return CrawlJob.objects.filter(status__in=FINAL).count()
    except Exception:
        with contextlib.suppress(Exception):
            connection.close()
        return None


class Chaos:
    def __init__(self, stack, redis, postgres, rng: random.Random, started: float) -> None:
        self.stack, self.redis, self.postgres, self.rng, self.started = stack, redis, postgres, rng, started
        self.faults: list[Fault] = []

    def inject(self, kind: str) -> Fault:
        pages = self.stack.total_hits()
        at, down = time.monotonic() - self.started, self.rng.uniform(2.0, 5.0)
        detail = getattr(self, f"_{kind}")(down)
        back = time.monotonic()
        recovery = self._progress_after(back)
        idle = recovery is None and final_jobs() == CrawlJob.objects.count()
        fault = Fault(kind, detail, round(at, 1), pages, round(back - self.started - at, 1), recovery, idle)
        self.faults.append(fault)
        print(f"chaos: {asdict(fault)}", flush=True)
        return fault

    def _progress_after(self, back: float) -> float | None:
        """Seconds until a page is fetched or a job ends; None if nothing moved because every job had ended."""
        hits, done = self.stack.total_hits(), final_jobs()
        while time.monotonic() - back < RECOVERY_LIMIT:
            now_done = final_jobs()
            if self.stack.total_hits() > hits or (done is not None and now_done is not None and now_done > done):
                return round(time.monotonic() - back, 2)
            if now_done is not None and now_done == CrawlJob.objects.count():
                return None
            done = done if done is not None else now_done
            time.sleep(0.05)
        return None

    def _redis_empty(self, down: float) -> str:
        self.redis.restart(keep_data=False, down_seconds=down)
        return "redis-server stopped, its append-only file deleted, started empty"

    def _redis_aof(self, down: float) -> str:
        self.redis.restart(keep_data=True, down_seconds=down)
        return "redis-server stopped and started from its append-only file"

    def _postgres(self, down: float) -> str:
        self.postgres.crash()
        time.sleep(down)
        self.postgres.start()
        return "pg_ctl stop -m immediate, then start (crash recovery)"

    def _crawl_worker(self, down: float) -> str:
        crawler = self.stack.crawler
        if self.rng.random() < 0.5:
            pid = self._busy_pool_process(crawler)
            os.kill(pid, signal.SIGKILL)
            return f"SIGKILL to pool process {pid} (Celery replaces it)"
        kill_hard(crawler)
        time.sleep(down)
        crawler.start()
        return "SIGKILL to the crawl worker and its pool, started again"

    def _busy_pool_process(self, crawler) -> int:
        """The pool process running a crawl if one does (its pid ends the job's `worker`), else any of them."""
        pids = crawler.pool_pids()
        with contextlib.suppress(Exception):
            for worker in CrawlJob.objects.filter(status="running").values_list("worker", flat=True):
                pid = int(worker.rsplit("/", 1)[-1])
                if pid in pids:
                    return pid
        return self.rng.choice(pids)

    def _ops_worker(self, down: float) -> str:
        kill_hard(self.stack.ops)
        time.sleep(down)
        self.stack.ops.start()
        return "SIGKILL to the ops worker (control, callbacks) and its pool, started again"
