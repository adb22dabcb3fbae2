"""Beat's sampler: queue depths over time for the dashboard, and which workers answer."""

from __future__ import annotations

from celery import shared_task


# Samples are only worth having fresh: a late one is skipped rather than run after the next is due.
# No task events (Flower): it runs every 30 s and would bury the crawls.
@shared_task(name="ops.tasks.sample_ops", expires=60, ignore_result=True, send_events=False)
def sample_ops() -> dict:
    from ops.services import ops_sample

    return ops_sample()


# Beat sends one every TRAWL_RETENTION_INTERVAL_SECONDS; a late one is dropped, the next does the same work.
@shared_task(name="ops.tasks.cleanup_jobs", expires=600, ignore_result=True, send_events=False)
def cleanup_jobs() -> dict:
    """Delete finished jobs older than TRAWL_RETENTION_DAYS, with their logs, sightings and deliveries."""
    from ops.retention import jobs_cleanup

    return jobs_cleanup()
