"""Choosing the scraper version that runs a job."""

from __future__ import annotations

import random

from project.errors import TrawlError
from registry.models import Scraper, ScraperVersion
from registry.selectors import versions_active


def version_route(
    *, scraper: Scraper, version: str = "", variant: str = "", priority: int = 50, rng: random.Random | None = None
) -> ScraperVersion:
    """Exact version if asked; else the latest of the asked variant; else weighted by traffic; else the default."""
    active = versions_active(scraper=scraper)
    if version:
        for candidate in active:
            if candidate.version == version:
                return candidate
        raise TrawlError(f"scraper {scraper.name!r} has no active version {version!r}", field="version")
    if variant:
        for candidate in active:
            if candidate.variant == variant:
                return candidate
        raise TrawlError(f"scraper {scraper.name!r} has no active {variant!r} version", field="variant")
    eligible = [v for v in active if v.traffic_pct > 0 and v.min_priority <= priority]
    total = sum(v.traffic_pct for v in eligible)
    if eligible:
        # Versions share traffic by weight; when the weights sum below 100 the rest goes to the default.
        pick = (rng or random).uniform(0, max(total, 100))
        for candidate in eligible:
            pick -= candidate.traffic_pct
            if pick < 0:
                return candidate
    for candidate in active:
        if candidate.is_default:
            return candidate
    if eligible:
        return eligible[0]
    raise TrawlError(f"scraper {scraper.name!r} has no version to route to (no default, no traffic)", field="scraper")
