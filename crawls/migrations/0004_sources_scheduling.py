import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


def ensure_builtin_scrapers(apps, schema_editor):
    """The built-in `sitemap` scraper (and any other built-in a database migrated earlier lacks)."""
    from registry.builtins import builtins_ensure

    builtins_ensure(apps.get_model("registry", "Scraper"), apps.get_model("registry", "ScraperVersion"))


class Migration(migrations.Migration):
    """Source scheduling: who discovered a source, when it last ran, why it runs next when it does; `sitemap`."""

    dependencies = [
        # Chained after a sibling 0004 so the graph keeps one leaf; on its own this needs only 0003.
        ("crawls", "0004_ops_periodic"),
        ("registry", "0002_builtin_scrapers"),
    ]

    operations = [
        migrations.AddField(
            model_name="source",
            name="last_run_at",
            field=models.DateTimeField(blank=True, help_text="When its last job ended.", null=True),
        ),
        migrations.AddField(
            model_name="source",
            name="parent",
            field=models.ForeignKey(
                blank=True,
                help_text="The hub or sitemap that discovered it.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="children",
                to="crawls.source",
            ),
        ),
        migrations.AddField(
            model_name="source",
            name="schedule_note",
            field=models.CharField(blank=True, help_text="Why the next run is when it is.", max_length=300),
        ),
        migrations.AlterField(
            model_name="source",
            name="timezone",
            # The validator (sources.models.validate_timezone) left out: it never reaches the database, and this model
            # moved to sources (0008), whose own migrations carry it; crawls importing sources would run up the layers.
            field=models.CharField(default="UTC", max_length=64),
        ),
        migrations.AlterField(
            model_name="source",
            name="window_end_hour",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="...until before this one; 22 → 6 is night.",
                null=True,
                validators=[django.core.validators.MaxValueValidator(23)],
            ),
        ),
        migrations.AlterField(
            model_name="source",
            name="window_start_hour",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="Crawls start from this hour (local)...",
                null=True,
                validators=[django.core.validators.MaxValueValidator(23)],
            ),
        ),
        migrations.RunPython(ensure_builtin_scrapers, migrations.RunPython.noop),
    ]
