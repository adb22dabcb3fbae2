from django.db import migrations


def create_builtins(apps, schema_editor):
    from registry.builtins import builtins_ensure

    builtins_ensure(apps.get_model("registry", "Scraper"), apps.get_model("registry", "ScraperVersion"))


class Migration(migrations.Migration):
    dependencies = [("registry", "0001_initial")]
    operations = [migrations.RunPython(create_builtins, migrations.RunPython.noop)]
