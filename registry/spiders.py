"""Resolving a ScraperVersion's `spider` dotted path to a Scrapy Spider class."""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path

from django.conf import settings
from django.utils.module_loading import import_string
from scrapy import Spider

from project.errors import TrawlError

# A worker imports a spider module once and keeps it: an edited module is not seen until the worker restarts.
RESTART_HINT = (
    "workers import a spider module once: restart them after changing it (or ship the code as a package;"
    " with TRAWL_SPIDER_RELOAD on, as in `make run`, changed modules are imported again)"
)
_loaded_mtimes: dict[str, float] = {}  # module name → its file's mtime when this process (re)loaded it


class SpiderImportError(TrawlError):
    """The version's spider cannot be imported or is not a Spider: the version's code is broken, not its routing."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message, field="spider")
        self.detail = detail  # the traceback, for the job's error and log


def spider_load(path: str) -> type[Spider]:
    if getattr(settings, "TRAWL_SPIDER_RELOAD", False):
        _reload_if_changed(path.rpartition(".")[0])
    try:
        spider_cls = import_string(path)
    except Exception as exc:  # ImportError, or whatever the module raised as it was imported (SyntaxError, ...)
        message = f"cannot import {path!r}: {type(exc).__name__}: {exc} ({RESTART_HINT})"
        raise SpiderImportError(message, detail="".join(traceback.format_exception(exc))) from exc
    if not (isinstance(spider_cls, type) and issubclass(spider_cls, Spider)):
        raise SpiderImportError(f"{path!r} is not a scrapy.Spider subclass")
    _remember(path.rpartition(".")[0])
    return spider_cls


def _remember(module_name: str) -> None:
    module = sys.modules.get(module_name)
    if module is not None and getattr(module, "__file__", None):
        _loaded_mtimes.setdefault(module_name, Path(module.__file__).stat().st_mtime)


def _reload_if_changed(module_name: str) -> None:
    """Development: import the module again when its file changed since this process loaded it."""
    module = sys.modules.get(module_name)
    if module is None or not getattr(module, "__file__", None):
        return
    mtime = Path(module.__file__).stat().st_mtime
    if _loaded_mtimes.setdefault(module_name, mtime) != mtime:
        importlib.invalidate_caches()
        importlib.reload(module)
        _loaded_mtimes[module_name] = mtime
