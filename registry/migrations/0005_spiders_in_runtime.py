"""The built-in spiders moved from crawls.scraping.spiders to runtime.spiders: versions that name them follow."""

from django.db import migrations
from django.db.models import F, Value
from django.db.models.functions import Replace

OLD, NEW = "crawls.scraping.spiders.", "runtime.spiders."


def forwards(apps, schema_editor):
    version_model = apps.get_model("registry", "ScraperVersion")
    version_model.objects.filter(spider__startswith=OLD).update(spider=Replace(F("spider"), Value(OLD), Value(NEW)))


def backwards(apps, schema_editor):
    version_model = apps.get_model("registry", "ScraperVersion")
    version_model.objects.filter(spider__startswith=NEW).update(spider=Replace(F("spider"), Value(NEW), Value(OLD)))


class Migration(migrations.Migration):
    dependencies = [("registry", "0004_packages")]
    operations = [migrations.RunPython(forwards, backwards)]
