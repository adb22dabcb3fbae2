"""Reads over scrapers and versions."""

from __future__ import annotations

from registry.models import Scraper, ScraperVersion
from registry.semver import semver_key


def versions_active(*, scraper: Scraper) -> list[ScraperVersion]:
    versions = ScraperVersion.objects.filter(scraper=scraper, deprecated_at__isnull=True)
    return sorted(versions, key=lambda v: semver_key(v.version), reverse=True)
