"""Composing the Scrapy settings of one crawl: defaults < scraper < version < job options < enforced."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from crawls.models import CrawlJob
from registry.models import ScraperVersion

# Never overridable: the telnet console and remote control open ports that can run code.
ENFORCED = {"TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False}
COMPONENT_SETTINGS = {
    "EXTENSIONS": "TRAWL_SCRAPY_EXTENSIONS",
    "DOWNLOADER_MIDDLEWARES": "TRAWL_SCRAPY_DOWNLOADER_MIDDLEWARES",
}


def crawl_settings(*, job: CrawlJob, version: ScraperVersion) -> dict[str, Any]:
    merged: dict[str, Any] = dict(settings.TRAWL_SCRAPY_SETTINGS)
    merged.update(version.scraper.settings or {})
    merged.update(version.settings or {})
    useragent = (job.options or {}).get("useragent")
    if useragent:
        merged["USER_AGENT"] = useragent
    for name, trawl_name in COMPONENT_SETTINGS.items():
        merged[name] = {**getattr(settings, trawl_name), **(merged.get(name) or {})}
    merged.update(ENFORCED)
    return merged


def trawl_setting(scrapy_settings: dict[str, Any], name: str, default: Any) -> Any:
    """Trawl's own knobs (TRAWL_JOB_TIMEOUT, TRAWL_MAX_SPIDER_ERRORS) may be set per scraper or version."""
    return scrapy_settings.get(name, default)
