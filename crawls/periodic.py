"""Beat's periodic tasks, kept in the database so operators can retune them in the admin."""

from __future__ import annotations

PERIODIC_TASKS = {
    # name: (task, every N seconds)
    "dispatch-due-sources": ("crawls.tasks.dispatch_due_sources", 60),
}


def periodic_tasks_ensure(periodic_task_model=None, interval_model=None) -> None:
    if periodic_task_model is None:
        from django_celery_beat.models import IntervalSchedule as interval_model
        from django_celery_beat.models import PeriodicTask as periodic_task_model
    for name, (task, seconds) in PERIODIC_TASKS.items():
        interval, _ = interval_model.objects.get_or_create(every=seconds, period="seconds")
        periodic_task_model.objects.get_or_create(
            name=name, defaults={"task": task, "interval": interval, "queue": "control"}
        )
