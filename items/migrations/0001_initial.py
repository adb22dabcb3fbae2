"""Takes over models the crawls app created before it was split (the crawls side is crawls 0008)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("catalog", "0002_periodic_map_categories"),
        ("crawls", "0007_ingestion"),
        ("registry", "0003_rollout_and_rollback"),
    ]

    # The crawls app made these tables before it was split; they keep their names (db_table). Only Django's
    # record of which app owns the models moves: no table is created, renamed or copied.
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Item",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("fingerprint", models.CharField(max_length=64)),
                        ("url", models.URLField(blank=True, max_length=2000)),
                        ("data", models.JSONField(default=dict)),
                        ("content_hash", models.CharField(max_length=64)),
                        ("first_seen", models.DateTimeField(default=django.utils.timezone.now)),
                        ("last_seen", models.DateTimeField(default=django.utils.timezone.now)),
                        ("changed_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "category",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="items",
                                to="catalog.category",
                            ),
                        ),
                        (
                            "last_job",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="crawls.crawljob",
                            ),
                        ),
                        (
                            "scraper",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="items", to="registry.scraper"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "crawls_item",
                        "ordering": ["-last_seen"],
                    },
                ),
                migrations.CreateModel(
                    name="ItemPriceChange",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("old_price", models.CharField(blank=True, max_length=40)),
                        ("old_currency", models.CharField(blank=True, max_length=3)),
                        ("new_price", models.CharField(blank=True, max_length=40)),
                        ("new_currency", models.CharField(blank=True, max_length=3)),
                        ("changed_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "item",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="price_changes",
                                to="items.item",
                            ),
                        ),
                        (
                            "job",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="crawls.crawljob",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "crawls_itempricechange",
                        "ordering": ["-changed_at", "-pk"],
                    },
                ),
                migrations.CreateModel(
                    name="ItemSighting",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "change",
                            models.CharField(
                                choices=[("new", "New"), ("changed", "Changed"), ("unchanged", "Unchanged")],
                                max_length=10,
                            ),
                        ),
                        (
                            "item",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="sightings", to="items.item"
                            ),
                        ),
                        (
                            "job",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="sightings",
                                to="crawls.crawljob",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "crawls_itemsighting",
                    },
                ),
                migrations.AddConstraint(
                    model_name="item",
                    constraint=models.UniqueConstraint(
                        fields=("scraper", "fingerprint"), name="unique_item_per_scraper"
                    ),
                ),
                migrations.AddIndex(
                    model_name="itempricechange",
                    index=models.Index(fields=["item", "-changed_at"], name="price_change_item_recent"),
                ),
                migrations.AddConstraint(
                    model_name="itemsighting",
                    constraint=models.UniqueConstraint(fields=("job", "item"), name="unique_sighting"),
                ),
            ],
            database_operations=[],
        ),
    ]
