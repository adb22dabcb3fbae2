from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand

from demo.seed import DEFAULT_CREDENTIALS_PATH, demo_seed


class Command(BaseCommand):
    help = (
        "Seed the demo: scrapers (stable + canary), sources on the demo shop, an admin user and an API token. "
        "Safe to run again. Prints one JSON line with the credentials."
    )

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8001", help="where `python -m demo.serve` listens")
        parser.add_argument(
            "--credentials",
            type=Path,
            default=DEFAULT_CREDENTIALS_PATH,
            help="JSON file keeping the generated admin password and API token between runs",
        )

    def handle(self, *args, base_url: str, credentials: Path, **options):
        self.stdout.write(json.dumps(demo_seed(base_url=base_url, credentials_path=credentials)))
