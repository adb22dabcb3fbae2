"""Learning from a source's finished job: its next run, interval, failures and last stats."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from crawls.models import CrawlJob
from sources.models import Source
from sources.scheduling import BACKOFF_ERRORS, JobOutcome, Plan, job_outcome, next_run_at, plan_next_run
from sources.windows import source_cron_next, source_window


@transaction.atomic
def source_job_feedback(*, job: CrawlJob) -> Source | None:
    """Learn from a source's finished job: adapt its interval or back off, count failures, book its next run."""
    source = Source.objects.select_for_update().select_related("scraper").filter(pk=job.source_id).first()
    if source is None:
        return None
    stats = job.stats or {}
    outcome = job_outcome(status=job.status, error_class=job.error_class, stats=stats)
    plan = plan_next_run(
        outcome=outcome,
        interval=source.current_interval,
        minimum=source.min_interval,
        maximum=source.max_interval,
        failures=source.consecutive_failures,
        many=settings.TRAWL_SCHEDULING_MANY_CHANGES,
        steps=tuple(settings.TRAWL_SCHEDULING_BACKOFF),
        max_retry_after=settings.TRAWL_SCHEDULING_MAX_RETRY_AFTER,
    )
    finished = job.finished_at or timezone.now()
    if source.cron:
        _cron_planned(source, plan=plan, outcome=outcome, finished=finished)
    else:
        source.next_sync_at = next_run_at(finished_at=finished, delay=plan.delay, window=source_window(source))
        waits = source.next_sync_at > finished + timedelta(seconds=plan.delay)
        source.schedule_note = (plan.reason + ("; then waits for its crawl window" if waits else ""))[:300]
    source.current_interval, source.consecutive_failures, source.last_run_at = plan.interval, plan.failures, finished
    source.last_stats = {"job": str(job.id), "status": job.status, "error_class": job.error_class, **stats}
    fields = ["next_sync_at", "schedule_note", "current_interval", "consecutive_failures", "last_run_at", "last_stats"]
    source.save(update_fields=[*fields, "updated_at"])
    return source


def _cron_planned(source: Source, *, plan: Plan, outcome: JobOutcome, finished: datetime) -> None:
    """A cron source runs at its next minute after the job, or after the backoff when the site failed or refused it
    (or asked for a Retry-After): the cron replaces the adaptive interval, not the politeness."""
    backs_off = outcome.error_class in BACKOFF_ERRORS or (outcome.retry_after or 0) > 0
    after = finished + timedelta(seconds=plan.delay) if backs_off else finished
    source.next_sync_at = source_cron_next(source, after=after)
    why = plan.reason if backs_off else f"{outcome.status}"
    source.schedule_note = f"{why}; cron {source.cron!r} ({source.timezone})"[:300]
