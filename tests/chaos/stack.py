"""The mixed workload's stack, on the driver's private PostgreSQL and Redis: the schema, a requester, beat's periodic
tasks, the sites, the web, the workers and beat, and the work itself (a wide crawl at speed, a `parallelism: 2` crawl,
a 20-job batch with a webhook receiver, scheduled sources). Needs Django set up on those servers first.

Periods shrunk for the test (production in brackets): the reaper runs every 2 s (15 s) and calls a heartbeat stale
after 20 s (30 s), re-publishes a queued job after 10 s (900 s); the batch sweeper runs every 5 s (60 s), the source
dispatcher every 2 s (60 s); webhook retries back off from 0.4 s (minutes); heartbeats every 1 s (5 s), the value
the test settings export to every process. Frontier leases and the infrastructure patience keep production values.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import timedelta
from pathlib import Path

from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tests.callbacks.harness import FAST_ENV, Beat, Receiver
from tests.chaos.harness import Web, write_wide_site
from tests.sites import LocalSite, write_catalogue
from tests.workers import BASE_DIR, Worker

CHAOS_ENV = {
    **FAST_ENV,
    "TRAWL_REAPER_STALE_SECONDS": "20",
    "TRAWL_REAPER_QUEUED_SECONDS": "10",
    "TRAWL_BATCH_JOB_LOST_SECONDS": "300",
}
BATCH_JOBS, SOURCES = 20, 4


def schema_and_schedule() -> None:
    """Migrate the private database; beat's tasks: the reaper, sweepers and source dispatcher, nothing else."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from project.periodic import periodic_tasks_ensure
    from registry.builtins import builtins_ensure

    call_command("migrate", verbosity=0)
    builtins_ensure()
    periodic_tasks_ensure()
    every = {name: seconds for name, seconds in (("reap-dead-jobs", 2), ("dispatch-due-sources", 2))}
    every |= {"sweep-batches": 5, "sweep-deliveries": 5}
    PeriodicTask.objects.exclude(name__in=list(every)).update(enabled=False)
    for name, seconds in every.items():
        interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.filter(name=name).update(interval=interval, enabled=True)


class LogReadyWorker(Worker):
    """Ready when its log says so: the driver's own broker connections may be stale after a Redis restart, and a
    control ping through them raises instead of answering (the workers' reconnection is what is under test)."""

    def start(self, timeout: float = 60) -> Worker:
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        return super().start(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}:\n{self.log_tail()}")
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                if b" ready." in log.read():
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"worker not ready within {timeout}s:\n{self.log_tail()}")


class Stack:
    """Everything the scenario starts, and stops again whatever happens."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sites: dict[str, tuple[str, LocalSite]] = {}  # origin → (workload kind, site)
        self.receiver = Receiver()
        self.web = Web(env={**os.environ, "PYTHONPATH": str(BASE_DIR)}, log_dir=root)
        self.ops = LogReadyWorker(queues="control,callbacks", concurrency=1, env=CHAOS_ENV, log_dir=root)
        self.crawler = LogReadyWorker(queues="crawls", concurrency=3, env=CHAOS_ENV, log_dir=root)
        self.beat = Beat(log_dir=root, env=CHAOS_ENV)
        self.jobs: dict[str, str] = {}  # job id → workload kind (sources' jobs are found by their source)
        self.batch_ids: list = []
        self.big: LocalSite | None = None  # the latest round's wide site

    def site(self, kind: str, name: str, writer) -> LocalSite:
        folder = self.root / "sites" / name
        writer(folder)
        site = LocalSite(folder).__enter__()
        self.sites[site.url] = (kind, site)
        return site

    def start(self) -> None:
        self.receiver.__enter__()
        self.web.start()
        self.ops.start()
        self.crawler.start()
        self.beat.start()

    def submit(self, requester, *, round_: int = 0) -> None:
        """One round of the workload, on sites of its own (a soak submits one per round of faults)."""
        from crawls.services import batches
        from crawls.services.jobs import job_create
        from sources.services.sources import source_create

        big = self.big = self.site("big", f"big-{round_}", lambda root: write_wide_site(root, lists=40, per_list=49))
        job = job_create(url=f"{big.url}/index.html", requester=requester, options={"maxdepth": 2})
        self.jobs[str(job.pk)] = "big"
        wide = self.site("parallel", f"parallel-{round_}", lambda root: write_wide_site(root, lists=10, per_list=30))
        job = job_create(url=f"{wide.url}/index.html", requester=requester, options={"maxdepth": 2}, parallelism=2)
        self.jobs[str(job.pk)] = "parallel"
        specs = []
        for n in range(BATCH_JOBS):
            shop = self.site(
                "batch", f"batch-{round_}-{n}", lambda root: write_catalogue(root, products=12, per_page=5)
            )
            specs.append({"url": f"{shop.url}/index.html", "options": {"maxdepth": 6}})
        batch = batches.batch_create(requester=requester, jobs=specs, callback_url=self.receiver.url)
        self.batch_ids.append(batch.pk)
        now = timezone.now()
        for n in range(SOURCES):  # due now and over the next 30 s: beat dispatches them while faults happen
            page = self.site("source", f"source-{round_}-{n}", _one_page)
            source_create(url=f"{page.url}/index.html", next_sync_at=now + timedelta(seconds=10 * n))

    def total_hits(self) -> int:
        return sum(sum(site.hits.values()) for _, site in self.sites.values())

    def big_hits(self) -> int:
        """Requests the latest round's wide crawl has made."""
        return sum(self.big.hits.values())

    def alive(self) -> dict[str, bool]:
        return {
            "web": self.web.alive(),
            "ops": self.ops.alive(),
            "crawl": self.crawler.alive(),
            "beat": self.beat.process is not None and self.beat.process.poll() is None,
        }

    def logs(self, lines: int = 80) -> str:
        parts = [("ops", self.ops.log_tail(lines)), ("crawl", self.crawler.log_tail(lines))]
        parts += [("beat", self.beat.log_tail(lines)), ("web", _tail(self.web.log_path, lines))]
        return "\n".join(f"--- {name} ---\n{text}" for name, text in parts)

    def stop(self) -> None:
        for stop in (self.beat.stop, self.crawler.stop, self.ops.stop, self.web.stop):
            with contextlib.suppress(Exception):
                stop()
        with contextlib.suppress(Exception):
            self.receiver.__exit__(None, None, None)
        for _, site in self.sites.values():
            site.__exit__(None, None, None)
        connection.close()


def _one_page(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "index.html").write_text("<html><title>Source</title><body><h1>One page</h1></body></html>")


def _tail(path: Path, lines: int) -> str:
    with contextlib.suppress(FileNotFoundError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""
