"""Beat's periodic tasks of every app (by Celery task name), kept in the database so operators can retune them in the
admin. Here, below every app, because each app's data migration ensures the whole table."""

from __future__ import annotations

PERIODIC_TASKS = {
    # name: (task, every N seconds, or the name of the setting that says how many)
    "dispatch-due-sources": ("sources.tasks.dispatch_due_sources", 60),
    # Batches whose chord callback never came (lost worker, hard time limit) and launches that were lost.
    "sweep-batches": ("crawls.tasks.sweep_batches", 60),
    # Webhook deliveries whose task vanished (lost message, worker died while holding a retry).
    "sweep-deliveries": ("callbacks.tasks.sweep_deliveries", 60),
    # Queue depths over time for the admin dashboard, and which workers answer (TRAWL_STATS_SAMPLE_SECONDS).
    "ops-sample": ("ops.tasks.sample_ops", 30),
    # Jobs whose worker died (stale heartbeat) and queued jobs whose message was lost (TRAWL_REAPER_*).
    "reap-dead-jobs": ("crawls.tasks.reap_dead_jobs", "TRAWL_REAPER_INTERVAL_SECONDS"),
    # External category names still unmapped, mapped by the classifier when it is sure enough (TRAWL_INGESTION_*).
    "map-categories": ("catalog.tasks.map_categories", "TRAWL_INGESTION_MAPPING_SECONDS"),
    # Finished jobs older than TRAWL_RETENTION_DAYS, with their logs, sightings and deliveries (items stay).
    "cleanup-jobs": ("ops.tasks.cleanup_jobs", "TRAWL_RETENTION_INTERVAL_SECONDS"),
}


def periodic_tasks_ensure(periodic_task_model=None, interval_model=None) -> None:
    if periodic_task_model is None:
        from django_celery_beat.models import IntervalSchedule as interval_model
        from django_celery_beat.models import PeriodicTask as periodic_task_model
    from django.conf import settings

    for name, (task, seconds) in PERIODIC_TASKS.items():
        seconds = int(getattr(settings, seconds)) if isinstance(seconds, str) else seconds
        interval, _ = interval_model.objects.get_or_create(every=seconds, period="seconds")
        periodic_task_model.objects.get_or_create(
            name=name, defaults={"task": task, "interval": interval, "queue": "control"}
        )
