import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from registry.models import Scraper, ScraperVersion, Variant


class Command(BaseCommand):
    help = "Register a scraper version (the scraper is created if new). Validates the spider path and version."

    def add_arguments(self, parser):
        parser.add_argument("scraper", help="scraper name, e.g. demo_shop")
        parser.add_argument("version", help="semantic version, e.g. 1.2.0")
        parser.add_argument("spider", help="dotted path to a scrapy.Spider subclass, e.g. myproject.spiders.ShopSpider")
        parser.add_argument("--variant", choices=Variant.values, default=Variant.STABLE)
        parser.add_argument("--default", action="store_true", help="route here when nothing else matches")
        parser.add_argument("--traffic", type=int, default=0, help="share of unpinned jobs, 0..100")
        parser.add_argument("--min-priority", type=int, default=1)
        parser.add_argument(
            "--scrapy-settings", default="{}", help='Scrapy settings as JSON, e.g. {"DOWNLOAD_DELAY": 1}'
        )

    @transaction.atomic
    def handle(self, *args, scraper: str, version: str, spider: str, **options):
        try:
            settings = json.loads(options["scrapy_settings"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--scrapy-settings is not valid JSON: {exc}") from exc
        owner, _ = Scraper.objects.get_or_create(name=scraper)
        candidate = ScraperVersion(
            scraper=owner,
            version=version,
            spider=spider,
            variant=options["variant"],
            is_default=options["default"],
            traffic_pct=options["traffic"],
            min_priority=options["min_priority"],
            settings=settings,
        )
        try:
            candidate.full_clean()
        except ValidationError as exc:
            transaction.set_rollback(True)
            raise CommandError(
                "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            ) from None
        if options["default"]:
            ScraperVersion.objects.filter(scraper=owner, is_default=True).update(is_default=False)
        candidate.save()
        self.stdout.write(
            json.dumps(
                {
                    "scraper": owner.name,
                    "version": version,
                    "variant": candidate.variant,
                    "spider": spider,
                    "is_default": candidate.is_default,
                }
            )
        )
