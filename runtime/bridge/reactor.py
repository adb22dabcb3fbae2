"""One Twisted reactor per worker process, running in crochet's thread; Scrapy's components imported and the
process's garbage collector tuned for crawling."""

from __future__ import annotations

import gc
import importlib
import logging
import pkgutil
import threading
from typing import Any

logger = logging.getLogger("trawl.runtime")

# A crawl allocates and frees container objects by the hundred per page (requests, responses, Deferreds, tasks,
# items); at CPython's default (a young-generation pass every 700 net allocations) a 2,000-page crawl runs ~400
# young and ~40 middle passes (0.4-0.55 s of a ~5 s job), each also touching what the process imported (Django,
# Celery, Scrapy). With these thresholds and the import-time heap frozen, the same crawl runs ~10 (~0.05 s;
# bench/README.md). Real garbage cycles are still collected, after 10,000 allocations instead of 700.
GC_THRESHOLDS = (10_000, 10, 10)

# Scrapy imports most of its components when a crawl first builds them: in a fresh pool process that was ~7 % of the
# first job's reactor time (the HTTP handler's import alone walks the call stack for its deprecation shims), paid
# again after every pool restart. Imported with the process instead, they also land in the frozen heap.
COMPONENT_DICTS = ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "EXTENSIONS", "ITEM_PIPELINES")  # paths are keys
CLASS_SETTINGS = (
    "DOWNLOADER",
    "DNS_RESOLVER",
    "DOWNLOADER_CLIENTCONTEXTFACTORY",
    "ITEM_PROCESSOR",
    "LOG_FORMATTER",
    "REQUEST_FINGERPRINTER_CLASS",
    "ROBOTSTXT_PARSER",
    "STATS_CLASS",
)

_lock = threading.Lock()
_ready = False


def ensure_reactor() -> None:
    """Install the asyncio reactor and start it under crochet, import the crawl components and tune the collector,
    once per process.

    Called from Celery's `worker_process_init` (so the parent that forks pool processes never owns a reactor) and
    again, harmlessly, before each crawl for pools that do not send that signal (solo, threads).
    """
    global _ready
    with _lock:
        if _ready:
            return
        from scrapy.utils.reactor import install_reactor

        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
        import crochet

        crochet.setup()
        preload_components()
        tune_gc()
        _ready = True


def tune_gc() -> None:
    """Collect rarely, and never look again at what the process holds once it is set up (modules, settings, the
    app): everything alive now moves to a generation the collector skips. Called once a crawling process is ready."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def preload_components(*, spiders: bool = True) -> None:
    """Import the Scrapy components every crawl builds: Scrapy's defaults and Trawl's own (its middlewares,
    extensions, item handoff, frontier scheduler) and, unless told not to, Trawl's spiders. Only a head start: what
    cannot be imported here is left to fail, or be skipped, where a crawl uses it."""
    try:
        _import_components(spiders=spiders)
    except Exception:
        logger.warning("crawl components not preloaded; the first crawl imports them", exc_info=True)


def _import_components(*, spiders: bool) -> None:
    from scrapy.settings import Settings
    from scrapy.utils.misc import load_object

    from runtime.bridge.handoff import with_item_handoff
    from runtime.frontier import DUPEFILTER, SCHEDULER
    from runtime.settings.compose import base_crawl_settings

    base = base_crawl_settings()  # as every crawl has them
    settings = Settings({**with_item_handoff(base), "SCHEDULER": SCHEDULER, "DUPEFILTER_CLASS": DUPEFILTER})
    paths: list[Any] = [settings[name] for name in (*CLASS_SETTINGS, "SCHEDULER", "DUPEFILTER_CLASS")]
    paths += settings.getwithbase("DOWNLOAD_HANDLERS").values()
    for name in COMPONENT_DICTS:
        paths += [path for path, order in settings.getwithbase(name).items() if order is not None]
    for path in paths:
        if isinstance(path, str) and "." in path:  # not a placeholder such as Scrapy's "SENTINEL"
            try:
                load_object(path)
            except Exception as exc:  # an optional dependency missing: the crawl that needs it says so
                logger.debug("not preloaded: %s (%s)", path, exc)
    if spiders:
        package = importlib.import_module("runtime.spiders")
        for module in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
