"""Composing the Scrapy settings of one crawl: defaults < scraper < version < job options < enforced.

What is enforced here no scraper or version changes; runtime.settings.enforced keeps it so against the spider itself.
This is the one module of the runtime that reads django.conf: every TRAWL_* value a crawl's components read is
composed here into the crawl's settings (KNOBS and PROJECT_PINS), so the components read `crawler.settings` alone,
in the worker and in a packaged version's child alike.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from django.conf import settings
from scrapy.settings import Settings

from project.net import guard_enabled
from project.redis import REDIS_SETTING, redis_key
from project.redis.installation import installation_id
from runtime.guard.schemes import GATE, GATE_ORDER, SCHEMES_SETTING, allowed_schemes, download_handlers
from runtime.packaged.children import ChildPool
from runtime.packaged.project_names import CHILD_PACKAGES
from runtime.settings.enforced import COMPONENTS_SETTING, ENFORCED, GUARD, GUARD_ORDER
from runtime.settings.project import ProjectLayer
from runtime.spec import CrawlSpec
from runtime.watch.budget import (
    ITEMS_OPTION,
    ITEMS_SETTING,
    PAGES_OPTION,
    PAGES_SETTING,
    SECONDS_OPTION,
    SECONDS_SETTING,
)

COMPONENT_SETTINGS = {
    "EXTENSIONS": "TRAWL_SCRAPY_EXTENSIONS",
    "DOWNLOADER_MIDDLEWARES": "TRAWL_SCRAPY_DOWNLOADER_MIDDLEWARES",
}


# Knobs a scraper, version or source may set (a job's options too, for some): the project's value is the default.
KNOBS = (
    "TRAWL_INCREMENTAL",
    "TRAWL_INCREMENTAL_TTL",
    "TRAWL_STALL_SECONDS",
    "TRAWL_MONITOR_MIN_REQUESTS",
    "TRAWL_MAX_SPIDER_ERRORS",
    "TRAWL_MAX_SPIDER_ERROR_SHARE",
    "TRAWL_BLOCK_MARKERS",
    "TRAWL_BLOCK_SHARE",
    "TRAWL_PROXY_ENABLED",
    "TRAWL_PROXY_GROUP",
    "TRAWL_PROXY_COOLDOWN",
    "TRAWL_PROXY_BAN_STATUSES",
    "TRAWL_PROXY_BAN_MARKERS",
    "TRAWL_PROXY_REFRESH_SECONDS",
    "TRAWL_USER_AGENTS",
    "TRAWL_SELECTORS_PAGE_SECONDS",
    "TRAWL_STRUCTURED_DATA_MAX_BYTES",
    "TRAWL_ARTICLE_HTML_MAX_BYTES",
    "TRAWL_ARTICLE_MARKDOWN_MAX_BYTES",
    "TRAWL_RENDER",
    "TRAWL_RENDER_WAIT_FOR",
    "TRAWL_RENDER_TIMEOUT",
    "TRAWL_RENDER_RESOURCES",
    "TRAWL_RENDER_SCREENSHOTS",
    "TRAWL_ITEM_FIELD_MAX_BYTES",
    "TRAWL_ITEM_MAX_BYTES",
    "TRAWL_RENDER_MAXSIZE",
    "TRAWL_RECORD",
)
# The project's values a crawl must not change (Trawl's Redis, politeness, the egress, the frontier's timing, the
# guard's networks, the worker's browser): written over whatever a scraper or version set, and pinned against the
# spider by runtime.settings.enforced (every TRAWL_* setting is).
PROJECT_PINS = (
    "TRAWL_THROTTLE_ENABLED",
    "TRAWL_THROTTLE_DEFAULTS",
    "TRAWL_THROTTLE_ADAPTIVE",
    "TRAWL_THROTTLE_SLOT_LEASE",
    "TRAWL_THROTTLE_MAX_SLEEP",
    "TRAWL_THROTTLE_MAX_PAUSE",
    "TRAWL_THROTTLE_ROBOTS_TTL",
    "TRAWL_THROTTLE_RULES_TTL",
    "TRAWL_EGRESS_LABEL",
    "TRAWL_INFRA_PATIENCE_SECONDS",
    "TRAWL_FRONTIER_TTL_SECONDS",
    "TRAWL_FRONTIER_LEASE_SECONDS",
    "TRAWL_PRIVATE_TARGETS_ALLOWED",
    "TRAWL_DNS_SERVERS",
    "TRAWL_RENDER_CHROMIUM",
    "TRAWL_RENDER_MAX_PAGES",
    "TRAWL_RENDER_RECYCLE_PAGES",
    "TRAWL_RENDER_RECYCLE_MEMORY_MB",
    "TRAWL_RENDER_SCREENSHOTS_MAX",
    "TRAWL_SITEMAP_MAX_URLS",
    "TRAWL_ERROR_PAGES_MAX",
    "TRAWL_ERROR_PAGE_MAX_BYTES",
    "TRAWL_RECORD_MAX_BYTES",
    "TRAWL_RECORD_MAX_ITEMS",
)


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
    _budget(merged, spec)
    # Recording (runtime/replay): project < scraper < version < the source's config < the job's option `record`.
    if "TRAWL_RECORD" in spec.source_config:
        merged["TRAWL_RECORD"] = bool(spec.source_config["TRAWL_RECORD"])
    if "record" in spec.options:
        merged["TRAWL_RECORD"] = bool(spec.options["record"])
    merged.update(ENFORCED)
    with_schemes(merged)
    # The guard's switch is set here (its place in the chain by with_trawl_components).
    # Non-admin requesters' jobs only: scheduled work (no requester) crawls sources an admin registered.
    merged["TRAWL_GUARD_PRIVATE_TARGETS"] = guard_enabled() and spec.guarded
    # Names a FEEDS URI template may use (runtime/settings/feeds.py); a version's own FEED_URI_PARAMS wins.
    merged["TRAWL_FEED_PARAMS"] = {
        "job_id": spec.job_id,
        "attempt": spec.attempt,
        "scraper": spec.scraper,
        "version": spec.version,
    }
    merged.setdefault("FEED_URI_PARAMS", "runtime.settings.feeds.feed_uri_params")
    with_trawl_defaults(merged)
    return with_pins(merged)


def project_layer_for(*, spec: CrawlSpec) -> ProjectLayer | None:
    """How a packaged project's own settings module joins the settings composed here (runtime.settings.project):
    it replaces Trawl's defaults that no scraper, version or job option changed; the rest beats it."""
    if not spec.settings_module:
        return None
    chosen = {
        *spec.scraper_settings,
        *spec.version_settings,
        *(("USER_AGENT",) if spec.options.get("useragent") else ()),
    }
    return ProjectLayer(module=spec.settings_module, defaults=frozenset(set(settings.TRAWL_SCRAPY_SETTINGS) - chosen))


def with_trawl_defaults(merged: dict[str, Any]) -> dict[str, Any]:
    """`merged` (changed in place) with the project's value of every knob it does not set (None counts as unset)."""
    for name in KNOBS:
        if merged.get(name) is None:
            merged[name] = copy.deepcopy(getattr(settings, name))
    return merged


def with_pins(merged: dict[str, Any]) -> dict[str, Any]:
    """`merged` (changed in place) with the project's values no scraper or version changes."""
    merged.update({name: copy.deepcopy(getattr(settings, name)) for name in PROJECT_PINS})
    merged[REDIS_SETTING] = settings.REDIS_URL
    return merged


def base_crawl_settings() -> dict[str, Any]:
    """What every crawl's settings hold before a scraper's, a version's or a job's: the project's Scrapy settings,
    Trawl's components, the enforced switches and the allowed schemes' handlers."""
    return with_schemes({**with_trawl_components(dict(settings.TRAWL_SCRAPY_SETTINGS)), **ENFORCED})


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
    config = spec.source_config
    if "TRAWL_INCREMENTAL" in config:
        merged["TRAWL_INCREMENTAL"] = config["TRAWL_INCREMENTAL"]
    merged["TRAWL_INCREMENTAL_SCOPE"] = redis_key("incremental", "source", spec.source_id)


def _rendering(merged: dict[str, Any], spec: CrawlSpec) -> None:
    """Rendering's settings: project (with_trawl_defaults) < scraper < version < source config < the job's `render`
    options. The worker process's browser is shared by its crawls: only the operator sets it (PROJECT_PINS)."""
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


def _budget(merged: dict[str, Any], spec: CrawlSpec) -> None:
    """A job's `max_pages` / `max_items` (else its source's config's) are Scrapy's CLOSESPIDER_PAGECOUNT /
    CLOSESPIDER_ITEMCOUNT (made exact by runtime.watch.budget), its `max_seconds` CLOSESPIDER_TIMEOUT; a version's
    own lower value stays."""
    budgets = ((PAGES_OPTION, PAGES_SETTING, int), (ITEMS_OPTION, ITEMS_SETTING, int))
    for option, name, kind in (*budgets, (SECONDS_OPTION, SECONDS_SETTING, float)):
        asked = kind(spec.options.get(option) or spec.source_config.get(option) or 0)
        if asked:
            declared = kind(float(merged.get(name) or 0))
            merged[name] = min(asked, declared) if declared > 0 else asked


# The project's settings a packaged version's child gets as its Django settings: what Trawl's code there may read
# besides its crawl's settings (the services and Redis helpers its components call, logging). Families by prefix, so
# a setting added to one (TRAWL_THROTTLE_*, ...) reaches the child. Nothing here may hold a secret.
CHILD_SETTING_PREFIXES = (
    "TRAWL_SCRAPY_",
    "TRAWL_THROTTLE_",
    "TRAWL_PROXY_",
    "TRAWL_FRONTIER_",
    "TRAWL_INCREMENTAL",
    "TRAWL_JOB_LOG_",
    "TRAWL_BLOCK_",
    "TRAWL_PRIVATE_TARGETS_",
    "TRAWL_DNS_",
    "TRAWL_MONITOR_",
    "TRAWL_STALL_",
    "TRAWL_PACKAGE_CHILD",
)
CHILD_SETTINGS = (
    "INSTALLED_APPS",
    "DEFAULT_AUTO_FIELD",
    "USE_TZ",
    "TIME_ZONE",
    "LOGGING",
    "TRAWL_EGRESS_LABEL",
    "TRAWL_INFRA_PATIENCE_SECONDS",
    "TRAWL_USER_AGENTS",
    "TRAWL_ITEM_CHUNK",
)


def child_settings() -> dict[str, Any]:
    """A packaged version's child's Django settings (project.settings_child): the parent's values of those Trawl's
    code reads in the child; runtime.packaged.child_env adds the Redis URL meant for the child."""
    names = [name for name in dir(settings) if name.startswith(CHILD_SETTING_PREFIXES) or name in CHILD_SETTINGS]
    values = {name: getattr(settings, name) for name in names}
    # Apps for their models (components import services that import them); not the admin, whose autodiscovery
    # imports every API module and the settings they read, nor Trawl's apps a child never imports, whose names are
    # the project's there (runtime.packaged.project_names).
    values["INSTALLED_APPS"] = [app for app in settings.INSTALLED_APPS if _child_app(app)]
    # The child has no database to derive the installation's id (its Redis namespace) from: its parent's.
    return {**values, "TRAWL_INSTALLATION_ID": installation_id()}


def _child_app(app: str) -> bool:
    top = app.split(".")[0]
    return app != "django.contrib.admin" and (top in CHILD_PACKAGES or not (settings.BASE_DIR / top).is_dir())


def child_pool() -> ChildPool:
    """How this worker process keeps its packaged versions' children (runtime.packaged.children)."""
    return ChildPool(
        idle_seconds=float(settings.TRAWL_PACKAGE_CHILD_IDLE_SECONDS),
        kept=int(settings.TRAWL_PACKAGE_CHILDREN_KEPT),
        redis_url=settings.REDIS_URL,
        redis_acl=bool(settings.TRAWL_PACKAGE_CHILD_REDIS_ACL),
        child_settings=child_settings(),
        redis_nopass_allowed=bool(settings.TRAWL_PACKAGE_REDIS_NOPASS_ALLOWED),
    )
