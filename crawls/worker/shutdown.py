"""Warm shutdown of a crawl worker (SIGTERM, a rolling update): running crawls hand their work back at once.

A pool process keeps Celery's handler for SIGTERM (exit) while it runs no crawl. While it crawls, SIGTERM only raises
a flag: the crawl's next tick puts its in-flight requests back in the frontier, requeues the job (attempt + 1) for
another worker and stops (crawls.services.shards). The worker's main process forwards its own SIGTERM to the pool
processes running a crawl, so `kill <worker pid>` alone (Docker, systemd) does the same as signalling the group.
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
CRAWL_TASK = "crawls.tasks.run_crawl"


def shutdown_requested() -> bool:
    return _requested.is_set()


@contextlib.contextmanager
def crawling() -> Iterator[None]:
    """While inside, SIGTERM asks the crawl to hand its work back instead of ending the process (Celery's pool
    handler, which exits, is back in place afterwards). Signal handlers belong to the main thread: a crawl run from
    another thread (a thread pool) relies on the main process's `worker_shutting_down` instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        # Handed back. The task returns normally and the worker's warm shutdown ends this process; a pool process
        # signalled alone carries on with its next task.
        _requested.clear()


def _on_sigterm(signum: int, frame: object) -> None:
    # Only the flag: a handler runs between any two bytecodes of the main thread, perhaps inside a logging handler or
    # a database call, so it must take no lock. The crawl's next tick logs and hands the work back.
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
