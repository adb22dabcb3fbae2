"""What a Celery worker process of Trawl does as it starts and stops, for crawls' sake.

Connected from `CrawlsConfig.ready()`, so project/celery.py (below every app) never imports crawls. Django is set up
on Celery's `import_modules` signal, before `worker_init`, so these receivers are connected in time in every worker.
"""

from __future__ import annotations

import sys

from celery.signals import worker_init, worker_process_init, worker_process_shutdown, worker_shutting_down


def hide_environment(**_kwargs) -> None:
    # In the main process, before the pool forks: no process of the worker lets a packaged crawl's child (same user,
    # runtime.packaged.child_env) read the worker's secrets from its /proc/<pid>/environ.
    from runtime.packaged.child_env import undumpable

    undumpable()


def quiet_chord_failures(**_kwargs) -> None:
    # In the main process, before the pool forks: a batch's chord with a failed crawl is logged in a line.
    from crawls.worker.failures import chord_failure_logs_quieted

    chord_failure_logs_quieted()


def start_reactor(**_kwargs) -> None:
    # The reactor must be installed in the pool process itself, never in the parent that forks it. Its watchdog
    # replaces the pool process if the reactor stops answering while it crawls (crawls/worker/stalls.py).
    from crawls.worker.shutdown import hand_back_on_sigterm
    from crawls.worker.stalls import watchdog_start
    from project.pools.hosted import hosting
    from runtime.bridge.reactor import ensure_reactor

    ensure_reactor()
    watchdog_start()
    if hosting():  # several crawls on task threads (project.pools.crawlhost): SIGTERM hands every one back
        hand_back_on_sigterm()


def close_browser(**_kwargs) -> None:
    # A pool process that rendered pages closes its Chromium as it exits (a SIGKILLed one: see rendering/browser.py).
    # One that never rendered never imported the browser module (nor Playwright): nothing to close, nothing to load.
    browser = sys.modules.get("runtime.rendering.browser")
    if browser is not None:
        browser.browser_close()


def hand_crawls_back(**_kwargs) -> None:
    # A warm shutdown (SIGTERM) requeues running crawls at once instead of waiting for them (crawls/worker/shutdown.py).
    from crawls.worker.shutdown import forward_to_pool

    forward_to_pool()


def connect() -> None:
    # dispatch_uid: connecting twice (ready() run again by a test) must not run a receiver twice.
    worker_init.connect(hide_environment, weak=False, dispatch_uid="crawls.hide_environment")
    worker_init.connect(quiet_chord_failures, weak=False, dispatch_uid="crawls.quiet_chord_failures")
    worker_process_init.connect(start_reactor, weak=False, dispatch_uid="crawls.start_reactor")
    worker_process_shutdown.connect(close_browser, weak=False, dispatch_uid="crawls.close_browser")
    worker_shutting_down.connect(hand_crawls_back, weak=False, dispatch_uid="crawls.hand_crawls_back")
