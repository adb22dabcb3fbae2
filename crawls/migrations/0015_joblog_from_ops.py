"""JobLog, moved from ops (ops/migrations/0003_joblog_to_crawls.py): the state only; its table, `ops_joblog`, was
created by ops/migrations/0001_job_logs.py and keeps its name and rows."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("crawls", "0014_job_screenshot"),
        ("ops", "0003_joblog_to_crawls"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="JobLog",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("attempt", models.PositiveSmallIntegerField()),
                        ("shard", models.PositiveSmallIntegerField(default=0)),
                        ("text", models.TextField(blank=True)),
                        ("records", models.PositiveIntegerField(default=0, help_text="Records logged, kept or not.")),
                        ("dropped", models.PositiveIntegerField(default=0)),
                        ("stored_at", models.DateTimeField(auto_now=True)),
                        (
                            "job",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="logs", to="crawls.crawljob"
                            ),
                        ),
                    ],
                    options={
                        "db_table": "ops_joblog",
                        "ordering": ["job", "attempt", "shard"],
                        "constraints": [
                            models.UniqueConstraint(fields=("job", "attempt", "shard"), name="unique_job_log")
                        ],
                    },
                ),
            ]
        ),
    ]
