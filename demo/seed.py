"""Seeding a fresh Trawl with the demo: scrapers, sources on the demo shop, an admin user and an API token.

Idempotent: a second run finds everything in place and changes nothing (it only reports the credentials again).
Existing rows are never overwritten, so what a user edited in the admin survives a re-seed.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from access.services import token_authenticate, token_issue
from demo.generate import catalogue
from registry.builtins import builtins_ensure
from registry.models import Scraper, ScraperVersion, Variant
from sources.models import Source, SourceKind, SourceStrategy

ADMIN_USER = "admin"
REQUESTER = "demo"
DEFAULT_CREDENTIALS_PATH = Path(settings.BASE_DIR) / "var" / "demo-credentials.json"
SPIDER = "demo.spiders.DemoShopSpider"
VERSIONS = (
    {"version": "1.0.0", "variant": Variant.STABLE, "is_default": True, "traffic_pct": 90, "settings": {}},
    {"version": "1.1.0", "variant": Variant.CANARY, "traffic_pct": 10, "settings": {"DEMO_SHOP_EXTRACT_STOCK": True}},
)
PRODUCT_FIELDS = {
    "sku": ".sku::text",
    "title": "h1.title::text",
    "price": "span.price::text",
    "category": ".category-name::text",
    "image": "img.product-image::attr(src)",
}
# Short intervals so beat dispatches the demo sources within a minute of `make run` and again every few minutes.
SCHEDULE = {"refresh_interval": 300, "current_interval": 300, "min_interval": 300, "max_interval": 3600}


def demo_scraper_ensure() -> Scraper:
    scraper, _ = Scraper.objects.get_or_create(
        name="demo_shop", defaults={"description": "The demo shop served by `python -m demo.serve`."}
    )
    for spec in VERSIONS:
        if not ScraperVersion.objects.filter(scraper=scraper, version=spec["version"]).exists():
            version = ScraperVersion(scraper=scraper, spider=SPIDER, **spec)
            version.full_clean()  # proves the spider path imports before anything routes to it
            version.save()
    return scraper


def demo_sources_ensure(*, base_url: str, demo_shop: Scraper) -> list[Source]:
    """A hub crawled by the demo spider, a list and a product page crawled by config alone (`selectors`), and the
    sitemap, whose first category's products become product sources crawled by `selectors` too."""
    selectors = Scraper.objects.get(name="selectors")
    sitemap = Scraper.objects.get(name="sitemap")
    first = catalogue()[0]
    specs = [
        (demo_shop, f"{base_url}/index.html", SourceKind.HUB, SourceStrategy.DISCOVERY, 60, {}),
        (
            selectors,
            f"{base_url}/category/{first.slug}/page-1.html",
            SourceKind.LIST,
            SourceStrategy.DEEP,
            50,
            {"item_links": ".product-card a.product-link", "next_page": "a.next", "fields": PRODUCT_FIELDS},
        ),
        (
            selectors,
            f"{base_url}/product/{first.products[0].sku}.html",
            SourceKind.PRODUCT,
            SourceStrategy.DEEP,
            40,
            {"fields": PRODUCT_FIELDS},
        ),
        (
            sitemap,
            f"{base_url}/sitemap.xml",
            SourceKind.SITEMAP,
            SourceStrategy.DISCOVERY,
            30,
            {
                "allow": [f"/product/{first.products[0].sku.split('-')[0]}-"],
                "children": {"scraper": "selectors", "config": {"fields": PRODUCT_FIELDS}},
            },
        ),
    ]
    now = timezone.now()
    sources = []
    for scraper, url, kind, strategy, priority, config in specs:
        defaults = {"kind": kind, "strategy": strategy, "priority": priority, "config": config, "next_sync_at": now}
        source, _ = Source.objects.get_or_create(scraper=scraper, url=url, defaults={**defaults, **SCHEDULE})
        sources.append(source)
    return sources


def demo_throttle_ensure(*, base_url: str) -> None:
    """A politeness rule for the demo host: fast enough that the demo crawls in seconds, still shared by workers."""
    from throttling.models import DomainThrottle
    from throttling.services import throttle_create

    host = urlsplit(base_url).hostname or "127.0.0.1"
    if not DomainThrottle.objects.filter(domain=host).exists():
        throttle_create(domain=host, rate=20, burst=20, ip_rate=20, ip_burst=20, note="demo shop (seed_demo)")


def demo_admin_ensure(*, password: str) -> None:
    """A superuser `admin` whose password is `password`; hashed again only when it differs."""
    user = get_user_model().objects.filter(username=ADMIN_USER).first()
    if user is None:
        get_user_model().objects.create_superuser(ADMIN_USER, email="admin@localhost", password=password)
        return
    if not (user.is_active and user.is_staff and user.is_superuser and user.check_password(password)):
        user.is_active = user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()


def demo_token_ensure(*, stored: str) -> str:
    """The stored token while it still authenticates as the admin requester `demo`, else a freshly issued one."""
    requester = token_authenticate(token=stored) if stored else None
    if requester is not None and requester.name == REQUESTER and requester.is_admin:
        return stored
    _, token = token_issue(requester_name=REQUESTER, admin=True)
    return token


def demo_seed(*, base_url: str, credentials_path: Path = DEFAULT_CREDENTIALS_PATH) -> dict[str, str]:
    """Seed everything and return the credentials a launcher shows: admin user + password, API token, requester."""
    base_url = base_url.rstrip("/")
    stored = credentials_read(credentials_path)
    # The environment wins, and is never written to disk; otherwise one generated password is kept in the file.
    password = os.environ.get("TRAWL_ADMIN_PASSWORD") or stored.get("admin_password") or secrets.token_urlsafe(12)
    with transaction.atomic():
        builtins_ensure()
        demo_sources_ensure(base_url=base_url, demo_shop=demo_scraper_ensure())
        demo_throttle_ensure(base_url=base_url)
        demo_admin_ensure(password=password)
        token = demo_token_ensure(stored=stored.get("api_token", ""))
    saved = {"admin_user": ADMIN_USER, "api_token": token, "requester": REQUESTER}
    if not os.environ.get("TRAWL_ADMIN_PASSWORD"):
        saved["admin_password"] = password
    if saved != stored:
        credentials_write(credentials_path, saved)
    return {"admin_user": ADMIN_USER, "admin_password": password, "api_token": token, "requester": REQUESTER}


def credentials_read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def credentials_write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Readable by the owner only: it holds a working admin token.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
