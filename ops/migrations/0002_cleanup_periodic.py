from django.db import migrations


def create_periodic_tasks(apps, schema_editor):
    from project.periodic import periodic_tasks_ensure

    periodic_tasks_ensure(
        apps.get_model("django_celery_beat", "PeriodicTask"), apps.get_model("django_celery_beat", "IntervalSchedule")
    )


class Migration(migrations.Migration):
    """Adds beat's `cleanup-jobs` (finished jobs past TRAWL_RETENTION_DAYS, with their logs and deliveries)."""

    dependencies = [
        ("ops", "0001_job_logs"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create_periodic_tasks, migrations.RunPython.noop)]
