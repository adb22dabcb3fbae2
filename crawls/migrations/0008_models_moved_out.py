"""Sources, throttles and items now live in apps of their own: this app forgets them (state only) and their
content types follow them, so admin history and permissions keep pointing at the same rows."""

import django.db.models.deletion
from django.db import migrations, models

MOVED = {
    "source": "sources",
    "domainthrottle": "throttling",
    "proxy": "throttling",
    "item": "items",
    "itemsighting": "items",
    "itempricechange": "items",
}


def content_types_follow(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model, app_label in MOVED.items():
        if not content_type.objects.filter(app_label=app_label, model=model).exists():
            content_type.objects.filter(app_label="crawls", model=model).update(app_label=app_label)


def content_types_return(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model, app_label in MOVED.items():
        if not content_type.objects.filter(app_label="crawls", model=model).exists():
            content_type.objects.filter(app_label=app_label, model=model).update(app_label="crawls")


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("crawls", "0007_ingestion"),
        ("sources", "0001_initial"),
        ("throttling", "0001_initial"),
        ("items", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="crawljob",
                    name="source",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="jobs",
                        to="sources.source",
                    ),
                ),
                migrations.DeleteModel(name="ItemPriceChange"),
                migrations.DeleteModel(name="ItemSighting"),
                migrations.DeleteModel(name="Item"),
                migrations.DeleteModel(name="Proxy"),
                migrations.DeleteModel(name="DomainThrottle"),
                migrations.DeleteModel(name="Source"),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_follow, content_types_return),
    ]
