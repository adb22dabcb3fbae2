"""One Twisted reactor per worker process, running in crochet's thread."""

from __future__ import annotations

import threading

_lock = threading.Lock()
_ready = False


def ensure_reactor() -> None:
    """Install the asyncio reactor and start it under crochet, once per process.

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
        _ready = True
