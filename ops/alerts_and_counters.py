"""What ops does once a job's final state is committed: subscribed to crawls.hooks.JOB_ENDED in OpsConfig.ready()."""

from __future__ import annotations

from crawls.models import CrawlJob
from ops.alerts import job_alert_emit
from ops.services import job_finished_record


def alert(job: CrawlJob) -> None:
    """One signed `job.alert` per receiver for the monitor breaches the end stored (found by
    crawls.services.monitoring)."""
    if job.alerts:
        job_alert_emit(job=job)


def counters(job: CrawlJob) -> None:
    job_finished_record(job=job)
