"""`job.alert` webhooks: a job's monitor breaches, sent to its callback URL and to TRAWL_ALERT_WEBHOOK_URL."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from callbacks.models import EventType
from callbacks.services import event_emit
from crawls.models import CrawlJob
from crawls.webhooks import job_data

logger = logging.getLogger("trawl.monitors")


def job_alert_data(job: CrawlJob) -> dict[str, Any]:
    """The job as `job.*` events carry it, plus its `alerts`."""
    return {**job_data(job), "alerts": job.alerts}


def job_alert_emit(*, job: CrawlJob) -> int:
    """Store the deliveries (deduplicated per job attempt and receiver); returns how many were new. A follow-up of
    the job's end (crawls.services.after_end), so it runs once the end is committed."""
    job = CrawlJob.objects.select_related("scraper", "version").get(pk=job.pk)
    data = job_alert_data(job)
    emitted = 0
    if job.callback_url:
        key = f"job-alert:{job.pk}:{job.attempt}"
        emitted += _emit(job, key=key, url=job.callback_url, data=data, requester_id=job.requester_id)
    if settings.TRAWL_ALERT_WEBHOOK_URL:
        from access.models import Requester

        signer = settings.TRAWL_ALERT_WEBHOOK_REQUESTER
        requester = Requester.objects.filter(name=signer).first() if signer else None
        if requester is None:
            logger.warning("job.alert to TRAWL_ALERT_WEBHOOK_URL unsigned: no requester named %r", signer)
        key = f"job-alert-ops:{job.pk}:{job.attempt}"
        signer_id = requester.pk if requester else None
        emitted += _emit(job, key=key, url=settings.TRAWL_ALERT_WEBHOOK_URL, data=data, requester_id=signer_id)
    return emitted


def _emit(job: CrawlJob, *, key: str, url: str, data: dict, requester_id: int | None) -> int:
    delivery = event_emit(
        event=EventType.JOB_ALERT, dedupe_key=key, target_url=url, data=data, requester_id=requester_id, job_id=job.pk
    )
    return 1 if delivery else 0
