from django.db import migrations


def create_periodic_tasks(apps, schema_editor):
    # Ensures every entry of project.periodic.PERIODIC_TASKS, now including the batch and delivery sweepers.
    from project.periodic import periodic_tasks_ensure

    periodic_tasks_ensure(
        apps.get_model("django_celery_beat", "PeriodicTask"), apps.get_model("django_celery_beat", "IntervalSchedule")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("callbacks", "0001_initial"),
        ("crawls", "0002_periodic_tasks"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create_periodic_tasks, migrations.RunPython.noop)]
