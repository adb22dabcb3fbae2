"""Trawl's enforcement, applied after every other source of a crawl's settings: `crawler_create` builds every crawl,
in a worker's reactor (runtime.bridge.runner) and in a packaged version's child (runtime.packaged.child).

Scrapy applies a spider's `custom_settings` in Crawler.__init__ at 'spider' priority, replacing whole settings: the
common idiom `custom_settings = {"DOWNLOADER_MIDDLEWARES": {...}}` would drop Trawl's guard, throttle and block
detection. The spider's from_crawler, add-ons and extensions may change settings too until the crawl freezes them.
`TrawlCrawler` therefore takes its `Pins` from the settings Trawl composed, before any spider code ran, and:

- applies them right after the spider's custom_settings, and again just before the settings are built into
  components, above every priority Scrapy knows: Trawl's components at their orders (a spider's own middlewares,
  extensions and pipelines still join them), the enforced DOWNLOAD_HANDLERS, every TRAWL_* setting (a spider sets
  none), the switches in ENFORCED and the Scrapy settings in PINNED;
- checks the frozen settings against them and refuses to start the crawl (EnforcedSettingChanged, naming the setting)
  when something changed them after all.

This module imports no Django: the packaged child may run without it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrapy import Spider
from scrapy.crawler import Crawler, CrawlerRunner
from scrapy.settings import BaseSettings, Settings, default_settings
from scrapy.statscollectors import MemoryStatsCollector

from runtime.bridge.handoff import HANDOFF, HANDOFF_ORDER, with_item_handoff
from runtime.guard.schemes import GATE, GATE_ORDER, SCHEMES_SETTING, allowed_schemes, download_handlers
from runtime.items.bounds import ITEM_BOUNDS, ITEM_BOUNDS_ORDER
from runtime.watch.budget import BUDGET_CLOSESPIDER, ITEM_BUDGET, ITEM_BUDGET_ORDER, SCRAPY_CLOSESPIDER

SCRAPY_ROBOTS = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
SHARED_ROBOTS = "throttling.robots_shared.SharedRobotsTxtMiddleware"  # read once per TRAWL_THROTTLE_ROBOTS_TTL
ENFORCED_PRIORITY = 10**6  # above every priority Scrapy names ('cmdline' is 40)
# Never overridable: the telnet console and remote control open ports that can run code. AutoThrottle adapts each
# process's delay to what that process alone sees, on top of the cluster-wide buckets and their adaptive controller
# (which see every worker): two controllers fighting over one site, the per-process one blind to the others' load.
# Scrapy imports every extension of EXTENSIONS_BASE before it asks whether it is on: the two consoles are left out of
# it, so their code never enters a crawling process (the remote control's brings aiohttp's server, ~8 MiB of each
# crawl pool process: bench/README.md, "A lighter worker").
LEFT_OUT_EXTENSIONS = ("scrapy.extensions.telnet.TelnetConsole", "scrapy.extensions.remote_control.RemoteControl")
ENFORCED = {
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
    # Scrapy's CloseSpider counts robots.txt fetches as pages: Trawl's counts the spider's (runtime.watch.budget).
    "EXTENSIONS_BASE": {
        (BUDGET_CLOSESPIDER if path == SCRAPY_CLOSESPIDER else path): order
        for path, order in default_settings.EXTENSIONS_BASE.items()
        if path not in LEFT_OUT_EXTENSIONS
    },
    # Scrapy's RobotsTxtMiddleware fetches a host's robots.txt once per crawl: Trawl's shares it across the fleet.
    "DOWNLOADER_MIDDLEWARES_BASE": {
        (SHARED_ROBOTS if path == SCRAPY_ROBOTS else path): order
        for path, order in default_settings.DOWNLOADER_MIDDLEWARES_BASE.items()
    },
    "AUTOTHROTTLE_ENABLED": False,
    "DOWNLOADER_STATS": True,  # DownloaderStats counts the status codes a job's outcome is decided on
}
# Scrapy settings that decide which code runs a crawl or where its items go: the value Trawl composed (an admin's
# scraper or version may set them), else Scrapy's default; never a spider's.
PINNED = ("DOWNLOADER", "ITEM_PROCESSOR", "SCHEDULER", "DUPEFILTER_CLASS", "STATS_CLASS", "FEEDS")
TRAWL_PREFIX = "TRAWL_"
COMPONENTS_SETTING = "TRAWL_COMPONENTS"  # {dict setting: {path: order}}: Trawl's entries (runtime.settings.compose)
COMPONENT_DICTS = ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "EXTENSIONS", "ITEM_PIPELINES")
GUARD = "runtime.guard.guard.PrivateTargetGuard"
GUARD_ORDER = 790  # after proxy rotation (740), before the throttle (800) so a refused request takes no token
# In every crawl, whatever the composed settings say: the scheme gate, the guard (on for guarded crawls), the item
# bounds and the handoff, and Scrapy's own counters, which a job's stats and outcome are read from
# (runtime.bridge.outcome).
ALWAYS = {
    "DOWNLOADER_MIDDLEWARES": {
        GATE: GATE_ORDER,
        GUARD: GUARD_ORDER,
        "scrapy.downloadermiddlewares.stats.DownloaderStats": 850,
    },
    "EXTENSIONS": {"scrapy.extensions.corestats.CoreStats": 0},
    "ITEM_PIPELINES": {ITEM_BOUNDS: ITEM_BOUNDS_ORDER, ITEM_BUDGET: ITEM_BUDGET_ORDER, HANDOFF: HANDOFF_ORDER},
}


class EnforcedSettingChanged(RuntimeError):
    def __init__(self, name: str, why: str = "") -> None:
        why = why or "was changed after Trawl enforced it (by the spider, an add-on or an extension)"
        super().__init__(
            f"{name} {why}: Trawl's components and enforced settings cannot be removed, reordered or replaced; "
            f"the crawl was not started"
        )
        self.setting = name


@dataclass(frozen=True)
class Pins:
    """What no spider may change, read from the settings Trawl composed for one crawl."""

    values: dict[str, Any]
    components: dict[str, dict[str, int]]
    handlers: dict[str, str | None]

    @classmethod
    def of(cls, composed: Mapping[str, Any], settings: BaseSettings | None = None) -> Pins:
        """`settings`: `composed` as Scrapy Settings, untouched yet, when the caller built them already."""
        settings = Settings(dict(composed)) if settings is None else settings
        values = {name: plain(settings[name]) for name in PINNED}
        values.update({name: value for name, value in composed.items() if name.startswith(TRAWL_PREFIX)})
        values.update(ENFORCED)
        values[SCHEMES_SETTING] = list(allowed_schemes(composed.get(SCHEMES_SETTING)))
        declared = dict_of(settings, COMPONENTS_SETTING)
        components = {name: dict(declared.get(name) or {}) for name in COMPONENT_DICTS}
        for name, entries in ALWAYS.items():
            components[name].update(entries)
        handlers = download_handlers(
            allowed=values[SCHEMES_SETTING], declared=settings.getwithbase("DOWNLOAD_HANDLERS")
        )
        return cls(
            values=values, components={name: found for name, found in components.items() if found}, handlers=handlers
        )


def plain(value: Any) -> Any:
    """A setting's value as plain data (Scrapy keeps dict settings as BaseSettings)."""
    return value.copy_to_dict() if isinstance(value, BaseSettings) else value


def dict_of(settings: BaseSettings, name: str) -> dict[str, Any]:
    """A dict setting as a dict, whatever a spider wrote there (a JSON string, None, garbage: {})."""
    value = settings.get(name)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return dict(value) if isinstance(value, (Mapping, BaseSettings)) else {}


def pins_apply(settings: BaseSettings, pins: Pins) -> None:
    """Put the pins over whatever the settings hold now; the rest (a spider's own entries) stays."""
    for name, value in pins.values.items():
        # A copy: a list or dict set here is the crawl's to read, not a way to change the pin in place.
        settings.set(name, copy.deepcopy(value), priority=ENFORCED_PRIORITY)
    for name in [name for name in settings if name.startswith(TRAWL_PREFIX) and name not in pins.values]:
        settings.delete(name, priority=ENFORCED_PRIORITY)  # the spider's own TRAWL_*: Trawl composed every one it reads
    for name, entries in pins.components.items():
        settings.set(name, {**dict_of(settings, name), **entries}, priority=ENFORCED_PRIORITY)
    handlers = {scheme: None for scheme in settings.getwithbase("DOWNLOAD_HANDLERS")} | pins.handlers
    for name in ("DOWNLOAD_HANDLERS_BASE", "DOWNLOAD_HANDLERS"):
        settings.set(name, handlers, priority=ENFORCED_PRIORITY)


def pins_broken(settings: BaseSettings, pins: Pins) -> str:
    """The first setting that no longer holds its pin ("" when all do)."""
    for name, value in pins.values.items():
        if plain(settings[name]) != value:
            return name
    for name in settings:
        if name.startswith(TRAWL_PREFIX) and name not in pins.values:
            return name
    for name, entries in pins.components.items():
        merged = settings.getwithbase(name)
        if any(merged.get(path) != order for path, order in entries.items()):
            return name
    for scheme, handler in settings.getwithbase("DOWNLOAD_HANDLERS").items():
        if handler is not None and pins.handlers.get(scheme) != handler:
            return "DOWNLOAD_HANDLERS"
    return ""


class TrawlCrawler(Crawler):
    """A Crawler whose settings end with Trawl's pins, whatever the spider and its add-ons did to them."""

    def __init__(self, spidercls: type[Spider], settings: Settings, *, pins: Pins) -> None:
        self.pins = pins
        super().__init__(spidercls, settings)  # applies the spider's custom_settings
        pins_apply(self.settings, pins)

    def _apply_settings(self) -> None:
        if self.settings.frozen:
            return
        pins_apply(self.settings, self.pins)  # after the spider's from_crawler, before add-ons and components
        super()._apply_settings()  # add-ons, stats, extensions; freezes the settings
        broken = pins_broken(self.settings, self.pins)
        if broken:
            raise EnforcedSettingChanged(broken)
        if not isinstance(self.stats, MemoryStatsCollector):  # one that keeps nothing would hide what Trawl counts
            stats_class = self.settings["STATS_CLASS"]
            raise EnforcedSettingChanged("STATS_CLASS", f"is {stats_class}, not a scrapy MemoryStatsCollector")


class OneCrawlSettings(Settings):
    """Settings composed for one crawl, which its Crawler takes as they are: Scrapy's Crawler deep-copies the settings
    it is given (about 400 of them: 4 ms, and a second copy kept for the whole crawl, with many crawls per process).
    TrawlRunner builds these for its one crawler and keeps no other use for them."""

    handing_over = False  # set just before the crawler copies them: that one copy is these settings themselves
    handed_over = False
    building_runner = False  # while TrawlRunner builds Scrapy's runner, whose spider loader reads no setting

    def frozencopy(self) -> BaseSettings:
        if not self.building_runner or self.get("SPIDER_LOADER_CLASS") != HANDED_SPIDER_LOADER:
            return super().frozencopy()
        handed = BaseSettings()  # for HandedSpiderLoader.from_settings: not a copy of the ~400 settings
        handed.freeze()
        return handed

    def copy(self) -> OneCrawlSettings:
        if not self.handing_over:
            return super().copy()
        self.handing_over = False
        _values_owned(self)  # lists and dicts still shared with Scrapy's defaults and the composed dict
        return self


def _values_owned(settings: BaseSettings) -> None:
    """Every value a copy of its own (strings, numbers and classes are their own already): a crawl that changes one in
    place changes no other crawl of the process nor Scrapy's defaults, as with Scrapy's deep copy of the whole, without
    copying the settings' own structure a second time."""
    for attribute in settings.attributes.values():
        if isinstance(attribute.value, BaseSettings):
            _values_owned(attribute.value)
        else:
            attribute.value = copy.deepcopy(attribute.value)


class HandedSpiderLoader:
    """A TrawlRunner's spider loader: its crawl is handed the spider class, never looks one up by name, so the
    project's loader (which imports every module of SPIDER_MODULES) need not be built for each crawl."""

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> HandedSpiderLoader:
        return cls()

    def load(self, spider_name: str) -> type[Spider]:
        raise KeyError(f"a Trawl crawl is handed its spider class; it looks none up by name ({spider_name!r})")

    def list(self) -> list[str]:
        return []

    def find_by_request(self, request: Any) -> list[str]:
        return []


HANDED_SPIDER_LOADER = f"{__name__}.HandedSpiderLoader"


class TrawlRunner(CrawlerRunner):
    """A runner of one crawl (crawler_create), always handed its spider class. Scrapy's runner builds a spider
    loader from a frozen deep copy of its settings (4 ms a crawl) to look spiders up by name, and merges its settings
    into a crawler it is handed, which here holds those very settings: neither is done."""

    def __init__(self, settings: dict[str, Any]) -> None:
        composed = OneCrawlSettings(settings)
        self.pins = Pins.of(settings, composed)
        composed.set("SPIDER_LOADER_CLASS", HANDED_SPIDER_LOADER, priority=ENFORCED_PRIORITY)
        composed.building_runner = True
        try:
            super().__init__(composed)
        finally:
            composed.building_runner = False

    def create_crawler(self, crawler_or_spidercls: type[Spider] | Crawler) -> Crawler:
        if isinstance(crawler_or_spidercls, Crawler) and crawler_or_spidercls.settings is self.settings:
            return crawler_or_spidercls  # its settings are these: Scrapy's merge would set each to itself
        return super().create_crawler(crawler_or_spidercls)

    def _create_crawler(self, spidercls: str | type[Spider]) -> Crawler:
        if isinstance(spidercls, str):
            spidercls = self.spider_loader.load(spidercls)
        if self.settings.handed_over:  # its crawler has them: no longer as composed
            raise RuntimeError("a TrawlRunner creates one crawler")
        self.settings.handing_over = self.settings.handed_over = True
        return TrawlCrawler(spidercls, self.settings, pins=self.pins)


def crawler_create(spider_cls: type[Spider], settings: dict[str, Any]) -> tuple[CrawlerRunner, Crawler]:
    """The runner and crawler of one crawl, with the item handoff and Trawl's pins: the only way Trawl builds one."""
    if not hasattr(Crawler, "_apply_settings"):
        import scrapy

        raise RuntimeError(f"Scrapy {scrapy.__version__} is too old for Trawl's crawls (2.13 or later is needed)")
    runner = TrawlRunner(with_item_handoff(settings))
    return runner, runner.create_crawler(spider_cls)
