"""Takes over models the crawls app created before it was split (the crawls side is crawls 0008)."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("crawls", "0007_ingestion"),
    ]

    # The crawls app made these tables before it was split; they keep their names (db_table). Only Django's
    # record of which app owns the models moves: no table is created, renamed or copied.
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="DomainThrottle",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "domain",
                            models.CharField(help_text="Registered domain or exact host.", max_length=253, unique=True),
                        ),
                        (
                            "rate",
                            models.FloatField(
                                default=1.0,
                                help_text="Requests per second.",
                                validators=[django.core.validators.MinValueValidator(0)],
                            ),
                        ),
                        ("burst", models.PositiveIntegerField(default=5)),
                        (
                            "ip_rate",
                            models.FloatField(
                                default=1.0,
                                help_text="Per egress IP, req/s.",
                                validators=[django.core.validators.MinValueValidator(0)],
                            ),
                        ),
                        ("ip_burst", models.PositiveIntegerField(default=5)),
                        (
                            "scale",
                            models.FloatField(
                                default=1.0,
                                help_text="Multiplies both rates.",
                                validators=[
                                    django.core.validators.MinValueValidator(0),
                                    django.core.validators.MaxValueValidator(1),
                                ],
                            ),
                        ),
                        (
                            "blocked",
                            models.BooleanField(default=False, help_text="Refuse every request to this domain."),
                        ),
                        ("note", models.TextField(blank=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        "db_table": "crawls_domainthrottle",
                        "ordering": ["domain"],
                    },
                ),
                migrations.CreateModel(
                    name="Proxy",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "url",
                            models.CharField(
                                help_text="e.g. http://user:pass@10.0.0.5:3128", max_length=500, unique=True
                            ),
                        ),
                        (
                            "egress_label",
                            models.CharField(help_text="The egress IP this proxy leaves from.", max_length=100),
                        ),
                        (
                            "group",
                            models.CharField(
                                blank=True, help_text="Sources may ask for a proxy group.", max_length=100
                            ),
                        ),
                        ("enabled", models.BooleanField(default=True)),
                        ("cooling_down_until", models.DateTimeField(blank=True, null=True)),
                        ("note", models.TextField(blank=True)),
                    ],
                    options={
                        "verbose_name_plural": "proxies",
                        "db_table": "crawls_proxy",
                        "ordering": ["egress_label"],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
