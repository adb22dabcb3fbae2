"""What sources does as a job ends: subscribed to crawls.hooks.JOB_ENDING in SourcesConfig.ready(), so a source's
next run commits with its job's final state."""

from __future__ import annotations

from crawls.models import CrawlJob
from sources.services.feedback import source_job_feedback


def source_feedback(job: CrawlJob) -> None:
    if job.source_id:
        source_job_feedback(job=job)
