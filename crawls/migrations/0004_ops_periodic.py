from django.db import migrations


def create_periodic_tasks(apps, schema_editor):
    from project.periodic import periodic_tasks_ensure

    periodic_tasks_ensure(
        apps.get_model("django_celery_beat", "PeriodicTask"), apps.get_model("django_celery_beat", "IntervalSchedule")
    )


class Migration(migrations.Migration):
    """Adds beat's `ops-sample` (queue depths over time, workers answering) to databases migrated before it existed."""

    dependencies = [
        ("crawls", "0003_batches_throttles_proxies"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create_periodic_tasks, migrations.RunPython.noop)]
