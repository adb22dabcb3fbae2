"""Composing the Scrapy settings of one crawl: defaults < scraper < version < job options < enforced.

What is enforced here no scraper or version changes; runtime.settings.enforced keeps it so against the spider itself.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from scrapy.settings import Settings

from project.net import guard_enabled
from project.redis import redis_key
from runtime.guard.schemes import GATE, GATE_ORDER, SCHEMES_SETTING, allowed_schemes, download_handlers
from runtime.settings.enforced import COMPONENTS_SETTING, ENFORCED, GUARD, GUARD_ORDER
from runtime.spec import CrawlSpec

COMPONENT_SETTINGS = {
    "EXTENSIONS": "TRAWL_SCRAPY_EXTENSIONS",
    "DOWNLOADER_MIDDLEWARES": "TRAWL_SCRAPY_DOWNLOADER_MIDDLEWARES",
}


def scrapy_settings_for(*, spec: CrawlSpec) -> dict[str, Any]:
    merged: dict[str, Any] = dict(settings.TRAWL_SCRAPY_SETTINGS)
    merged.update(spec.scraper_settings)
    merged.update(spec.version_settings)
    useragent = spec.options.get("useragent")
    if useragent:
        merged["USER_AGENT"] = useragent
    with_trawl_components(merged)
    if spec.source_id:
        _incremental(merged, spec)
    _rendering(merged, spec)
    merged.update(ENFORCED)
    with_schemes(merged)
    # The guard's switch is set here (its place in the chain by with_trawl_components).
    # Non-admin requesters' jobs only: scheduled work (no requester) crawls sources an admin registered.
    merged["TRAWL_GUARD_PRIVATE_TARGETS"] = guard_enabled() and spec.guarded
    merged["TRAWL_PRIVATE_TARGETS_ALLOWED"] = list(settings.TRAWL_PRIVATE_TARGETS_ALLOWED)
    merged["TRAWL_DNS_SERVERS"] = list(settings.TRAWL_DNS_SERVERS)
    # Names a FEEDS URI template may use (runtime/settings/feeds.py); a version's own FEED_URI_PARAMS wins.
    merged["TRAWL_FEED_PARAMS"] = {
        "job_id": spec.job_id,
        "attempt": spec.attempt,
        "scraper": spec.scraper,
        "version": spec.version,
    }
    merged.setdefault("FEED_URI_PARAMS", "runtime.settings.feeds.feed_uri_params")
    return merged


def with_trawl_components(merged: dict[str, Any]) -> dict[str, Any]:
    """`merged` (changed in place) with Trawl's middlewares and extensions added to any the settings declare, at
    Trawl's orders: no scraper or version drops, disables or reorders one. They are also listed in TRAWL_COMPONENTS,
    which runtime.settings.enforced pins against the spider."""
    trawl = {name: dict(getattr(settings, trawl_name)) for name, trawl_name in COMPONENT_SETTINGS.items()}
    trawl["DOWNLOADER_MIDDLEWARES"].update({GATE: GATE_ORDER, GUARD: GUARD_ORDER})
    for name, entries in trawl.items():
        merged[name] = {**_declared_dict(merged.get(name)), **entries}
    merged[COMPONENTS_SETTING] = trawl
    return merged


def with_schemes(merged: dict[str, Any]) -> dict[str, Any]:
    """`merged` (changed in place) with the schemes its crawl may fetch — http, https and any an admin's scraper or
    version added in TRAWL_ALLOWED_SCHEMES — and download handlers for those only (runtime.guard.schemes)."""
    allowed = allowed_schemes(merged.get(SCHEMES_SETTING))
    merged[SCHEMES_SETTING] = list(allowed)
    declared = Settings(merged).getwithbase("DOWNLOAD_HANDLERS")
    merged["DOWNLOAD_HANDLERS"] = download_handlers(allowed=allowed, declared=declared)
    merged.pop("DOWNLOAD_HANDLERS_BASE", None)
    return merged


def _declared_dict(value: Any) -> dict[str, Any]:
    """A component dict as a scraper or version wrote it (Scrapy also takes JSON text there)."""
    if isinstance(value, str):
        value = json.loads(value or "{}")
    return dict(value or {})


def _incremental(merged: dict[str, Any], spec: CrawlSpec) -> None:
    """A source's crawl gets its own shared HTTP cache and lastmod memory (runtime/incremental/cache.py); the
    source's config may opt out with TRAWL_INCREMENTAL, like a scraper or version."""
    merged.setdefault("TRAWL_INCREMENTAL", settings.TRAWL_INCREMENTAL)
    if "TRAWL_INCREMENTAL" in spec.source_config:
        merged["TRAWL_INCREMENTAL"] = spec.source_config["TRAWL_INCREMENTAL"]
    merged["TRAWL_INCREMENTAL_SCOPE"] = redis_key("incremental", "source", spec.source_id)


# A scraper or version may set these (docs/rendering.md); the project's values are the defaults.
RENDER_CHOICES = (
    "TRAWL_RENDER",
    "TRAWL_RENDER_WAIT_FOR",
    "TRAWL_RENDER_TIMEOUT",
    "TRAWL_RENDER_RESOURCES",
    "TRAWL_RENDER_SCREENSHOTS",
)
# The worker process's browser is shared by its crawls: only the operator sets these.
RENDER_PROCESS = (
    "TRAWL_RENDER_CHROMIUM",
    "TRAWL_RENDER_MAX_PAGES",
    "TRAWL_RENDER_RECYCLE_PAGES",
    "TRAWL_RENDER_RECYCLE_MEMORY_MB",
    "TRAWL_RENDER_SCREENSHOTS_MAX",
)


def _rendering(merged: dict[str, Any], spec: CrawlSpec) -> None:
    """Rendering's settings: project < scraper < version < source config < the job's `render` options."""
    for name in RENDER_CHOICES:
        merged.setdefault(name, getattr(settings, name))
    if "TRAWL_RENDER" in spec.source_config:
        merged["TRAWL_RENDER"] = spec.source_config["TRAWL_RENDER"]
    options = spec.options
    if "render" in options:
        merged["TRAWL_RENDER"] = "always" if options["render"] else "never"
    if options.get("wait_for"):
        merged["TRAWL_RENDER_WAIT_FOR"] = options["wait_for"]
    if "screenshots" in options:
        merged["TRAWL_RENDER_SCREENSHOTS"] = options["screenshots"]
    if options.get("render_timeout"):
        merged["TRAWL_RENDER_TIMEOUT"] = min(float(options["render_timeout"]), settings.TRAWL_RENDER_TIMEOUT_MAX)
    merged.update({name: getattr(settings, name) for name in RENDER_PROCESS})
