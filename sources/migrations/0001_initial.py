"""Takes over models the crawls app created before it was split (the crawls side is crawls 0008)."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
import sources.models
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("crawls", "0007_ingestion"),
        ("registry", "0003_rollout_and_rollback"),
    ]

    # The crawls app made these tables before it was split; they keep their names (db_table). Only Django's
    # record of which app owns the models moves: no table is created, renamed or copied.
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Source",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("url", models.URLField(max_length=2000)),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("hub", "Hub (category links)"),
                                    ("list", "List (paginated items)"),
                                    ("product", "Product (one item)"),
                                    ("sitemap", "Sitemap"),
                                ],
                                default="list",
                                max_length=10,
                            ),
                        ),
                        (
                            "strategy",
                            models.CharField(
                                choices=[
                                    ("deep", "Deep (follow pagination, yield items)"),
                                    ("discovery", "Discovery (find new sources)"),
                                ],
                                default="deep",
                                max_length=10,
                            ),
                        ),
                        (
                            "priority",
                            models.PositiveSmallIntegerField(
                                default=50,
                                validators=[
                                    django.core.validators.MinValueValidator(1),
                                    django.core.validators.MaxValueValidator(100),
                                ],
                            ),
                        ),
                        (
                            "refresh_interval",
                            models.PositiveIntegerField(default=3600, help_text="Base seconds between crawls."),
                        ),
                        ("min_interval", models.PositiveIntegerField(default=600)),
                        ("max_interval", models.PositiveIntegerField(default=86400)),
                        ("current_interval", models.PositiveIntegerField(default=3600)),
                        ("next_sync_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        (
                            "config",
                            models.JSONField(
                                blank=True, default=dict, help_text="Cookies, headers, selectors, proxy group..."
                            ),
                        ),
                        ("enabled", models.BooleanField(default=True)),
                        (
                            "window_start_hour",
                            models.PositiveSmallIntegerField(
                                blank=True,
                                help_text="Crawls start from this hour (local)...",
                                null=True,
                                validators=[django.core.validators.MaxValueValidator(23)],
                            ),
                        ),
                        (
                            "window_end_hour",
                            models.PositiveSmallIntegerField(
                                blank=True,
                                help_text="...until before this one; 22 → 6 is night.",
                                null=True,
                                validators=[django.core.validators.MaxValueValidator(23)],
                            ),
                        ),
                        (
                            "timezone",
                            models.CharField(
                                default="UTC", max_length=64, validators=[sources.models.validate_timezone]
                            ),
                        ),
                        ("consecutive_failures", models.PositiveIntegerField(default=0)),
                        ("last_stats", models.JSONField(blank=True, default=dict)),
                        (
                            "last_run_at",
                            models.DateTimeField(blank=True, help_text="When its last job ended.", null=True),
                        ),
                        (
                            "schedule_note",
                            models.CharField(blank=True, help_text="Why the next run is when it is.", max_length=300),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "parent",
                            models.ForeignKey(
                                blank=True,
                                help_text="The hub or sitemap that discovered it.",
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="children",
                                to="sources.source",
                            ),
                        ),
                        (
                            "scraper",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="sources",
                                to="registry.scraper",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "crawls_source",
                        "ordering": ["next_sync_at"],
                        "constraints": [
                            models.UniqueConstraint(fields=("scraper", "url"), name="unique_source_per_scraper")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
