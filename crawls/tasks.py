"""Thin Celery tasks: take an id, call one service. Published by crawls.publish, by name."""

from __future__ import annotations

import os

from celery import shared_task

from crawls.services.batch_runs import batch_finalize, batch_launch, batches_sweep
from crawls.services.execution import job_execute
from crawls.services.reaper import jobs_reap
from crawls.worker.failures import CrawlFailed, crawl_failure_raise
from project.messaging.messages import shared_task_aliased
from project.pools.hosted import claims_in_order


# `url` only names the crawl in `celery inspect active` and Flower; the job row is the truth. The result (Flower's
# "Result" column) starts with the job's status and URL: `{'status': 'succeeded', 'url': '...', ...}`; a failed crawl
# is FAILURE with `CrawlFailed('http_5xx: ...')`, which a chord counts like any result (crawls.worker.failures).
# `throws`: an expected outcome, logged in a line, not as a worker error with a traceback.
# `shard` > 0: one more process for a job with `parallelism` > 1, sharing its frontier (crawls.services.shards).
@shared_task(
    bind=True, name="crawls.tasks.run_crawl", acks_late=True, reject_on_worker_lost=True, throws=(CrawlFailed,)
)
def run_crawl(self, job_id: str, attempt: int = 1, url: str = "", shard: int = 0) -> dict:
    worker = f"{self.request.hostname or 'local'}/{os.getpid()}"
    soft_limit = (self.request.timelimit or (None, None))[1]  # the slot's limits bound which job may take it
    result = job_execute(job_id=job_id, attempt=attempt, worker=worker, slot_soft_limit=soft_limit, shard=shard)
    crawl_failure_raise(result)
    return result


claims_in_order(run_crawl.name)  # in a crawl host, in the order its messages came (crawls.services.execution)


# On the crawls queue: the machine that builds it is one that runs its crawls (its first job starts warm there).
# registry.publish sends it by name; it runs here because it needs crawls' child process. Also registered as
# `registry.tasks.build_package`, so a build queued under that name still runs.
@shared_task_aliased(name="crawls.tasks.build_package", aliases=("registry.tasks.build_package",), acks_late=True)
def build_package(version_id: int) -> str:
    from crawls.services.package_build import version_package_build

    return version_package_build(version_id=version_id)


# Not acks_late: a replay that killed its worker is not run again by the next one; it stays `running`, and may be
# asked again. Its child has TRAWL_REPLAY_TIMEOUT.
@shared_task(name="crawls.tasks.replay_job")
def replay_job(replay_id: int) -> str:
    from crawls.models import JobReplay
    from crawls.replays.runs import job_replay_run

    replay = JobReplay.objects.select_related("job", "version").filter(pk=replay_id).first()
    return job_replay_run(replay=replay).status if replay else "gone"


@shared_task(name="crawls.tasks.launch_batch", acks_late=True)
def launch_batch(batch_id: str) -> str:
    return batch_launch(batch_id=batch_id)


# The chord body and its error callback; the sweeper and a batch's last job ending ask for the same service.
# Idempotent, so any may run first.
@shared_task(name="crawls.tasks.finalize_batch", acks_late=True)
def finalize_batch(batch_id: str) -> str:
    batch = batch_finalize(batch_id=batch_id)
    return batch.status if batch else "not finalized (already done or jobs still active)"


# Housekeeping tasks send no task events: Flower's task list is for crawls, not the reaper every 15 s.
@shared_task(name="crawls.tasks.sweep_batches", send_events=False)
def sweep_batches() -> dict:
    return batches_sweep()


# Beat sends one every TRAWL_REAPER_INTERVAL_SECONDS; a late one is dropped rather than run twice in a row.
@shared_task(name="crawls.tasks.reap_dead_jobs", expires=60, send_events=False)
def reap_dead_jobs() -> dict:
    """Requeue or end jobs whose worker died; republish queued jobs whose message was lost."""
    return jobs_reap()
