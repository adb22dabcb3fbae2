"""Warm shutdown of a crawl worker (SIGTERM, a rolling update): running crawls hand their work back at once.

A prefork pool process keeps Celery's handler for SIGTERM (exit) while it runs no crawl. While it crawls, SIGTERM only
raises a flag: the crawl's next tick puts its in-flight requests back in the frontier, requeues the job (attempt + 1)
for another worker and stops (crawls.services.shards). A crawl host process (project.pools.crawlhost, several crawls
on task threads) keeps the flag handler for its whole life: every crawl it runs hands back, and the flag is lowered
again once none is left. The worker's main process forwards its own SIGTERM to the pool processes running a crawl,
so `kill <worker pid>` alone (Docker, systemd) does the same as signalling the group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator

logger = logging.getLogger("trawl.jobs")

_requested = threading.Event()
_running = 0  # crawls of this process inside `crawling()`
_counting = threading.Lock()
CRAWL_TASK = "crawls.tasks.run_crawl"


def shutdown_requested() -> bool:
    return _requested.is_set()


def hand_back_on_sigterm() -> None:
    """In a crawl host process, from its start (main thread): SIGTERM raises the flag for every crawl it runs."""
    signal.signal(signal.SIGTERM, _on_sigterm)


@contextlib.contextmanager
def crawling() -> Iterator[None]:
    """While inside, SIGTERM asks the crawl to hand its work back instead of ending the process (Celery's pool
    handler, which exits, is back in place afterwards). Signal handlers belong to the main thread: a crawl run from
    another thread relies on its process's handler (a crawl host's, `hand_back_on_sigterm`) or, in a threads pool,
    on the main process's `worker_shutting_down`. The flag is lowered when the process's last crawl is out."""
    global _running
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    with _counting:
        if not _running:
            _requested.clear()  # a SIGTERM to an idle crawl host (no crawl to hand back) is not this crawl's
        _running += 1
    try:
        yield
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        with _counting:
            _running -= 1
            if not _running:
                # Handed back. The task returns normally and the worker's warm shutdown ends this process; a pool
                # process signalled alone carries on with its next task.
                _requested.clear()


def _on_sigterm(signum: int, frame: object) -> None:
    # Only the flag: a handler runs between any two bytecodes of the main thread, perhaps inside a logging handler or
    # a database call, so it must take no lock. The crawls' next ticks log and hand the work back.
    _requested.set()


def forward_to_pool() -> None:
    """In the main process when a warm shutdown starts (worker_shutting_down): tell the pool processes that crawl.

    Only those: a pool process running another task (a webhook delivery) finishes it, as a warm shutdown promises."""
    from celery.worker import state

    _requested.set()  # solo and thread pools crawl in this process
    active = list(state.active_requests)
    crawling_pids = {request.worker_pid for request in active if request.name == CRAWL_TASK and request.worker_pid}
    for pid in crawling_pids - {os.getpid()}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
