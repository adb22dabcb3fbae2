"""The fixtures and helpers of the registry's admin tests (tests/registry/test_admin_*.py): the `shop` scraper with a
stable and a canary version, a version by number, the traffic split, the scraper's change page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.models import ScraperVersion
from registry.services import version_create
from tests.registry.factories import LINK_SPIDER, make_scraper

VERSIONS_URL = "/admin/registry/scraperversion/"


@pytest.fixture
def shop():
    scraper = make_scraper("shop")
    version_create(scraper=scraper, version="1.0.0", spider=LINK_SPIDER, is_default=True, traffic_pct=90)
    version_create(scraper=scraper, version="1.1.0", spider=LINK_SPIDER, variant="canary", traffic_pct=10)
    return scraper


def version(v: str) -> ScraperVersion:
    return ScraperVersion.objects.get(scraper__name="shop", version=v)


def traffic() -> dict[str, int]:
    return {v.version: v.traffic_pct for v in ScraperVersion.objects.filter(scraper__name="shop")}


def change_page(admin_client, scraper):
    return admin_client.get(reverse("admin:registry_scraper_change", args=[scraper.pk]))
