"""Crawlers and crawl settings made by hand in tests, holding what every crawl's settings hold: the project's value of
each knob they do not set, and the values no crawl changes (runtime.settings.compose)."""

from __future__ import annotations

from typing import Any

from scrapy.crawler import Crawler
from scrapy.utils.test import get_crawler

from runtime.settings.compose import with_pins, with_trawl_defaults


def composed(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """`settings` with Trawl's defaults and pinned values added, as runtime.settings.compose adds them to a crawl's."""
    return with_pins(with_trawl_defaults(dict(settings or {})))


def trawl_crawler(spidercls: Any = None, settings_dict: dict[str, Any] | None = None) -> Crawler:
    """scrapy.utils.test.get_crawler with the crawl's settings composed as a job's are."""
    return get_crawler(spidercls, composed(settings_dict))
