from django.db import migrations


def ensure_builtin_scrapers(apps, schema_editor):
    """The built-in `article` scraper (and any other built-in a database migrated earlier lacks)."""
    from registry.builtins import builtins_ensure

    builtins_ensure(apps.get_model("registry", "Scraper"), apps.get_model("registry", "ScraperVersion"))


class Migration(migrations.Migration):
    dependencies = [("registry", "0007_stored_files")]

    operations = [migrations.RunPython(ensure_builtin_scrapers, migrations.RunPython.noop)]
