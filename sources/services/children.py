"""Turning the links a discovery job found into sources: deduplicated, inheriting the parent's scraper and config.

A spider reports a link with `runtime.spiders.discovery.discovered(url)`. The parent's config may steer what the
children get through `children`: {"scraper", "config", "kind", "strategy", "priority", "refresh_interval",
"min_interval", "max_interval", "allowed_domains"}; without it they inherit everything from the parent.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.utils import timezone

from crawls.models import CrawlJob
from registry.models import Scraper
from runtime.spiders.link import host_allowed
from runtime.watch.retry_after import RETRY_AFTER_STAT
from sources.models import Source, SourceKind, SourceStrategy
from sources.scheduling import clamp

logger = logging.getLogger("trawl.scheduling")

# What a parent of each kind finds by default: a hub its category lists, a sitemap its product pages.
CHILD_KINDS = {
    SourceKind.HUB: SourceKind.LIST,
    SourceKind.SITEMAP: SourceKind.PRODUCT,
    SourceKind.LIST: SourceKind.PRODUCT,
    SourceKind.PRODUCT: SourceKind.PRODUCT,
}
INHERITED = ("priority", "min_interval", "max_interval", "window_start_hour", "window_end_hour", "timezone")
CHUNK = 500


def source_crawl_extras(*, job: CrawlJob, discovered: list[dict[str, Any]], scrapy_stats: dict[str, Any]) -> dict:
    """Job stats a crawl adds for its source: links it discovered, sources created from them, the site's
    longest Retry-After. Creates the sources."""
    extras: dict[str, Any] = {}
    if scrapy_stats.get(RETRY_AFTER_STAT):
        extras["retry_after"] = scrapy_stats[RETRY_AFTER_STAT]
    if discovered:
        extras["discovered"] = len(discovered)
        extras["sources_created"] = sources_discover(job=job, records=discovered)
    return extras


def sources_discover(*, job: CrawlJob, records: list[dict[str, Any]]) -> int:
    """Create a source for each new link a job of a `discovery` source found; return how many were created.

    Deduplicated on (scraper, url), so the next run of the same hub creates nothing it created before. Only links on
    the parent's host (or `children.allowed_domains`) count: a hub never schedules the rest of the web.
    """
    parent = Source.objects.select_related("scraper").filter(pk=job.source_id).first() if job.source_id else None
    if parent is None or parent.strategy != SourceStrategy.DISCOVERY:
        return 0
    spec = dict(parent.config.get("children") or {})
    scraper = Scraper.objects.filter(name=spec["scraper"]).first() if spec.get("scraper") else parent.scraper
    if scraper is None:
        logger.warning("source %s: children.scraper %r does not exist; nothing created", parent.pk, spec["scraper"])
        return 0
    wanted = _wanted(parent, spec, records)
    template = _child_fields(parent, spec)
    created, now, urls = 0, timezone.now(), list(wanted)
    for start in range(0, len(urls), CHUNK):
        batch = urls[start : start + CHUNK]
        known = set(Source.objects.filter(scraper=scraper, url__in=batch).values_list("url", flat=True))
        fresh = [url for url in batch if url not in known]
        # ignore_conflicts: a concurrent job of another parent may have just created the same source.
        Source.objects.bulk_create(
            [
                Source(url=url, scraper=scraper, parent=parent, next_sync_at=now, **wanted[url], **template)
                for url in fresh
            ],
            ignore_conflicts=True,
        )
        created += len(fresh)
    logger.info("source %s discovered %s link(s), created %s source(s)", parent.pk, len(records), created)
    return created


def _wanted(parent: Source, spec: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Clean URL → {kind, strategy} for each acceptable record, first one wins, up to the discovery limit."""
    domains = [urlsplit(parent.url).hostname or "", *spec.get("allowed_domains", [])]
    default_kind = spec.get("kind") or CHILD_KINDS[parent.kind]
    wanted: dict[str, dict[str, str]] = {}
    for record in records:
        url = clean_url(record.get("url"))
        if not url or url in wanted or not host_allowed(url, domains):
            continue
        if len(wanted) >= settings.TRAWL_SCHEDULING_DISCOVERY_MAX:
            logger.warning("source %s found more than %s links; the rest are ignored", parent.pk, len(wanted))
            break
        kind = record.get("kind") if record.get("kind") in SourceKind.values else default_kind
        hunts = kind in (SourceKind.HUB, SourceKind.SITEMAP)
        strategy = spec.get("strategy") or (SourceStrategy.DISCOVERY if hunts else SourceStrategy.DEEP)
        wanted[url] = {"kind": kind, "strategy": strategy}
    return wanted


def _child_fields(parent: Source, spec: dict[str, Any]) -> dict[str, Any]:
    fields = {name: spec.get(name, getattr(parent, name)) for name in INHERITED}
    refresh = spec.get("refresh_interval", parent.refresh_interval)
    fields["refresh_interval"] = refresh
    fields["current_interval"] = clamp(refresh, fields["min_interval"], fields["max_interval"])
    fields["config"] = (
        spec["config"] if "config" in spec else {k: v for k, v in parent.config.items() if k != "children"}
    )
    return fields


def clean_url(url: Any) -> str:
    """An http(s) URL with a host and without its fragment, or "" if it is none."""
    if not isinstance(url, str) or len(url) > 2000:
        return ""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    return urlunsplit(parts._replace(fragment=""))
