"""A packaged Scrapy project's own settings module (scrapy.cfg `[settings] default`) in its crawls' settings:

    Trawl's defaults < the project's settings < scraper < version < job options < Trawl's pins

The worker composes every layer but the project's (runtime.settings.compose), because the module imports only inside
the package's environment; the package's child process (runtime.packaged.child) adds it with `with_project_settings`.
A ProjectLayer tells the child which composed settings hold Trawl's defaults only (the project's value replaces
them); any other composed setting was chosen by a scraper, a version or the job and beats the project's; what Trawl
pins (runtime.settings.enforced: its components, ENFORCED, PINNED, every TRAWL_* setting) the project cannot change,
and each one it tries to is named in the job's log.

This module imports no Django: the packaged child may run without it.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from scrapy.settings import Settings

from runtime.settings.enforced import COMPONENT_DICTS, COMPONENTS_SETTING, TRAWL_PREFIX, Pins, dict_of, plain

logger = logging.getLogger("trawl.project")
HANDLER_SETTINGS = ("DOWNLOAD_HANDLERS", "DOWNLOAD_HANDLERS_BASE")


@dataclass(frozen=True)
class ProjectLayer:
    """What a packaged crawl's child needs to put its project's settings beneath the composed ones."""

    module: str  # the project's settings module, importable inside the package's environment
    defaults: frozenset[str]  # composed settings holding Trawl's default only: the project's value replaces them

    def message(self) -> dict[str, Any]:
        return {"module": self.module, "defaults": sorted(self.defaults)}

    @classmethod
    def of_message(cls, data: Mapping[str, Any] | None) -> ProjectLayer | None:
        if not data or not data.get("module"):
            return None
        return cls(module=str(data["module"]), defaults=frozenset(map(str, data.get("defaults") or ())))


def project_settings_load(module: str) -> dict[str, Any]:
    """The module's settings as Scrapy reads a settings module: its upper-case names."""
    loaded = importlib.import_module(module)
    return {name: getattr(loaded, name) for name in dir(loaded) if name.isupper()}


def with_project_settings(
    composed: Mapping[str, Any], project: Mapping[str, Any], *, defaults: Collection[str]
) -> tuple[dict[str, Any], list[str]]:
    """The crawl's settings with the project's beneath every layer but Trawl's defaults, and the pinned settings the
    project tried to change (not applied). Its middlewares, pipelines and extensions join the composed ones: Trawl's
    keep their orders, and a scraper's or version's entry for the same class beats the project's."""
    pins = Pins.of(composed)
    pinned = {**pins.values, **{name: composed.get(name) for name in (*HANDLER_SETTINGS, COMPONENTS_SETTING)}}
    merged, refused = dict(composed), []
    for name, value in project.items():
        if name in COMPONENT_DICTS:
            mine, trawls = dict_of(Settings({name: value}), name), pins.components.get(name, {})
            if any(path in trawls and order != trawls[path] for path, order in mine.items()):
                refused.append(name)
            chosen = dict_of(Settings({name: composed.get(name)}), name)
            merged[name] = {**{path: order for path, order in mine.items() if path not in trawls}, **chosen}
        elif name in pinned or name.startswith(TRAWL_PREFIX):
            if plain(value) != pinned.get(name):
                refused.append(name)
        elif name not in composed or name in defaults:
            merged[name] = value
    return merged, refused


def project_settings_applied(composed: dict[str, Any], layer: ProjectLayer | None) -> tuple[dict[str, Any], list[str]]:
    """`composed` with the project's settings layered in (as is without a layer), and the pinned ones it sets."""
    if layer is None:
        return composed, []
    return with_project_settings(composed, project_settings_load(layer.module), defaults=layer.defaults)


def refused_log(layer: ProjectLayer | None, refused: list[str]) -> None:
    """Name, once and in the job's log, the pinned settings the project's settings tried to change."""
    if layer is not None and refused:
        logger.warning(
            "the project's settings (%s) set %s, which Trawl pins for every crawl: not applied",
            layer.module,
            ", ".join(sorted(refused)),
        )
