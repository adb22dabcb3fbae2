from django.db import migrations


def create_periodic_tasks(apps, schema_editor):
    from project.periodic import periodic_tasks_ensure

    periodic_tasks_ensure(
        apps.get_model("django_celery_beat", "PeriodicTask"), apps.get_model("django_celery_beat", "IntervalSchedule")
    )


class Migration(migrations.Migration):
    dependencies = [("crawls", "0001_initial"), ("django_celery_beat", "0019_alter_periodictasks_options")]
    operations = [migrations.RunPython(create_periodic_tasks, migrations.RunPython.noop)]
