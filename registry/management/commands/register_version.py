import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from project.errors import TrawlError
from project.messaging.brokers import PRIORITY_MIN
from registry.models import Scraper, Variant
from registry.services import scraper_create, version_create
from registry.services.packages import version_upload


class Command(BaseCommand):
    help = (
        "Register a scraper version (the scraper is created if new). Same rules as the admin and the API: "
        "semantic version, importable spider, traffic of active versions <= 100%."
    )

    def add_arguments(self, parser):
        parser.add_argument("scraper", help="scraper name, e.g. demo_shop")
        parser.add_argument("version", help="semantic version, e.g. 1.2.0")
        parser.add_argument(
            "spider",
            help="dotted path to a scrapy.Spider subclass, e.g. myproject.spiders.ShopSpider (inside the package if "
            "--package is given)",
        )
        parser.add_argument(
            "--package",
            metavar="PATH",
            help="a wheel holding the spider: built into an environment of its own by a worker, no restart needed",
        )
        parser.add_argument("--variant", choices=Variant.values, default=Variant.STABLE)
        parser.add_argument("--default", action="store_true", help="route here when nothing else matches")
        parser.add_argument("--traffic", type=int, default=0, help="share of unpinned jobs, 0..100")
        parser.add_argument("--min-priority", type=int, default=PRIORITY_MIN)
        parser.add_argument(
            "--scrapy-settings", default="{}", help='Scrapy settings as JSON, e.g. {"DOWNLOAD_DELAY": 1}'
        )

    def handle(self, *args, scraper: str, version: str, spider: str, **options):
        try:
            settings = json.loads(options["scrapy_settings"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--scrapy-settings is not valid JSON: {exc}") from exc
        if not isinstance(settings, dict):
            raise CommandError("--scrapy-settings must be a JSON object")
        try:
            # One transaction: a refused version leaves no new scraper behind.
            with transaction.atomic():
                owner = Scraper.objects.filter(name=scraper).first() or scraper_create(name=scraper)
                fields = {
                    "scraper": owner,
                    "version": version,
                    "spider": spider,
                    "variant": options["variant"],
                    "is_default": options["default"],
                    "traffic_pct": options["traffic"],
                    "min_priority": options["min_priority"],
                    "settings": settings,
                }
                created = self._create(fields, options["package"])
        except TrawlError as exc:
            raise CommandError(exc.message) from None
        except OSError as exc:
            raise CommandError(f"--package: cannot read {options['package']!r}: {exc.strerror}") from None
        summary = {
            "scraper": owner.name,
            "version": created.version,
            "variant": created.variant,
            "spider": created.spider,
            "is_default": created.is_default,
            "traffic_pct": created.traffic_pct,
            "package_status": created.package_status,
        }
        self.stdout.write(json.dumps(summary))

    def _create(self, fields: dict, package: str | None):
        if not package:
            return version_create(**fields)
        with open(package, "rb") as wheel:
            return version_upload(package=wheel, filename=Path(package).name, **fields)
