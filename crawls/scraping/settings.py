"""Composing the Scrapy settings of one crawl: defaults < scraper < version < job options < enforced."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from crawls.models import CrawlJob
from project.net import guard_enabled
from project.redis import redis_key
from registry.models import ScraperVersion

# Never overridable: the telnet console and remote control open ports that can run code. AutoThrottle adapts each
# process's delay to what that process alone sees, on top of the cluster-wide buckets and their adaptive controller
# (which see every worker): two controllers fighting over one site, the per-process one blind to the others' load.
ENFORCED = {"TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False, "AUTOTHROTTLE_ENABLED": False}
GUARD = "crawls.scraping.guard.PrivateTargetGuard"
GUARD_ORDER = 790  # after proxy rotation (740), before the throttle (800) so a refused request takes no token
# Connections that resolve through the crawl's resolver: the addresses the guard checked (crawls/scraping/resolver.py).
CHECKED_HANDLERS = {scheme: "crawls.scraping.handlers.CheckedHTTPDownloadHandler" for scheme in ("http", "https")}
COMPONENT_SETTINGS = {
    "EXTENSIONS": "TRAWL_SCRAPY_EXTENSIONS",
    "DOWNLOADER_MIDDLEWARES": "TRAWL_SCRAPY_DOWNLOADER_MIDDLEWARES",
}


def scrapy_settings_for(*, job: CrawlJob, version: ScraperVersion) -> dict[str, Any]:
    merged: dict[str, Any] = dict(settings.TRAWL_SCRAPY_SETTINGS)
    merged.update(version.scraper.settings or {})
    merged.update(version.settings or {})
    useragent = (job.options or {}).get("useragent")
    if useragent:
        merged["USER_AGENT"] = useragent
    with_trawl_components(merged)
    if job.source_id:
        _incremental(merged, job)
    merged.update(ENFORCED)
    # The guard's switch is set here (its place in the chain by with_trawl_components).
    # Non-admin requesters' jobs only: scheduled work (no requester) crawls sources an admin registered.
    merged["TRAWL_GUARD_PRIVATE_TARGETS"] = guard_enabled() and bool(job.requester_id and not job.requester.is_admin)
    merged["TRAWL_PRIVATE_TARGETS_ALLOWED"] = list(settings.TRAWL_PRIVATE_TARGETS_ALLOWED)
    merged["TRAWL_DNS_SERVERS"] = list(settings.TRAWL_DNS_SERVERS)
    if merged["TRAWL_GUARD_PRIVATE_TARGETS"] or merged["TRAWL_DNS_SERVERS"]:
        merged["DOWNLOAD_HANDLERS"] = {**(merged.get("DOWNLOAD_HANDLERS") or {}), **CHECKED_HANDLERS}
    # Names a FEEDS URI template may use (crawls/scraping/feeds.py); a version's own FEED_URI_PARAMS wins.
    merged["TRAWL_FEED_PARAMS"] = {
        "job_id": str(job.pk),
        "attempt": job.attempt,
        "scraper": version.scraper.name,
        "version": version.version,
    }
    merged.setdefault("FEED_URI_PARAMS", "crawls.scraping.feeds.feed_uri_params")
    return merged


def with_trawl_components(merged: dict[str, Any]) -> dict[str, Any]:
    """`merged` (changed in place) with Trawl's middlewares and extensions added to any the settings declare, and the
    private-target guard in its place: it is no scraper's to drop."""
    for name, trawl_name in COMPONENT_SETTINGS.items():
        merged[name] = {**getattr(settings, trawl_name), **(merged.get(name) or {})}
    merged["DOWNLOADER_MIDDLEWARES"][GUARD] = GUARD_ORDER
    return merged


def _incremental(merged: dict[str, Any], job: CrawlJob) -> None:
    """A source's crawl gets its own shared HTTP cache and lastmod memory (crawls/scraping/incremental.py); the
    source's config may opt out with TRAWL_INCREMENTAL, like a scraper or version."""
    merged.setdefault("TRAWL_INCREMENTAL", settings.TRAWL_INCREMENTAL)
    config = job.source.config or {}
    if "TRAWL_INCREMENTAL" in config:
        merged["TRAWL_INCREMENTAL"] = config["TRAWL_INCREMENTAL"]
    merged["TRAWL_INCREMENTAL_SCOPE"] = redis_key("incremental", "source", job.source_id)
