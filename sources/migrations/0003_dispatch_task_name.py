"""Beat's stored schedule sends the dispatch task under the name it is registered by now, sources.tasks'.

The task still answers its older name (sources/tasks.py), so a beat that reads the schedule before this runs keeps
dispatching; the `PeriodicTasks` stamp makes a running beat re-read the schedule.
"""

from django.db import migrations
from django.utils import timezone

RENAMED = {"crawls.tasks.dispatch_due_sources": "sources.tasks.dispatch_due_sources"}


def rename(apps, renames):
    periodic_task = apps.get_model("django_celery_beat", "PeriodicTask")
    changed = sum(periodic_task.objects.filter(task=old).update(task=new) for old, new in renames.items())
    if changed:
        apps.get_model("django_celery_beat", "PeriodicTasks").objects.update_or_create(
            ident=1, defaults={"last_update": timezone.now()}
        )


def forward(apps, schema_editor):
    rename(apps, RENAMED)


def backward(apps, schema_editor):
    rename(apps, {new: old for old, new in RENAMED.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0002_source_dispatch_order"),
        ("crawls", "0002_periodic_tasks"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(forward, backward)]
