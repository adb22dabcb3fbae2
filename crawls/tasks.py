"""Thin Celery tasks: take an id, call one service."""

from __future__ import annotations

import os

from celery import shared_task

from crawls.services import job_execute


@shared_task(bind=True, name="crawls.tasks.run_crawl", acks_late=True, reject_on_worker_lost=True)
def run_crawl(self, job_id: str, attempt: int = 1) -> dict:
    worker = f"{self.request.hostname or 'local'}/{os.getpid()}"
    return job_execute(job_id=job_id, attempt=attempt, worker=worker)


@shared_task(name="crawls.tasks.dispatch_due_sources")
def dispatch_due_sources() -> int:
    from crawls.services.sources import sources_dispatch_due

    return len(sources_dispatch_due())
