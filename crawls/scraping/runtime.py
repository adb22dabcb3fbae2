"""One Twisted reactor per worker process, running in crochet's thread; the process's garbage collector tuned for
crawling."""

from __future__ import annotations

import gc
import threading

# A crawl allocates and frees container objects by the hundred per page (requests, responses, Deferreds, tasks,
# items); at CPython's default (a young-generation pass every 700 net allocations) a 2,000-page crawl runs ~400
# young and ~40 middle passes (0.4-0.55 s of a ~5 s job), each also touching what the process imported (Django,
# Celery, Scrapy). With these thresholds and the import-time heap frozen, the same crawl runs ~10 (~0.05 s;
# bench/README.md). Real garbage cycles are still collected, after 10,000 allocations instead of 700.
GC_THRESHOLDS = (10_000, 10, 10)

_lock = threading.Lock()
_ready = False


def ensure_reactor() -> None:
    """Install the asyncio reactor and start it under crochet, and tune the collector, once per process.

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
        tune_gc()
        _ready = True


def tune_gc() -> None:
    """Collect rarely, and never look again at what the process holds once it is set up (modules, settings, the
    app): everything alive now moves to a generation the collector skips. Called once a crawling process is ready."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
