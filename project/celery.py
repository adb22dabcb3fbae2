"""The Celery app. Workers import this; it sets up the Scrapy reactor in every pool process."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import (
    beat_init,
    import_modules,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_shutting_down,
)

from project.broker_patches import kombu_redis_patch

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Celery's Django fixup runs Django's system checks as a worker starts; their URL check imports the whole URLconf
# (every API view, DRF, drf-spectacular, Jinja2 behind django.test...) into every worker and its pool processes, to
# check URLs a worker never serves. `manage.py migrate` and the web run them.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")
kombu_redis_patch()  # before any broker connection: a Redis restart must not end the worker (see the module)


@import_modules.connect(weak=False)
def without_admin_autodiscovery(**_kwargs) -> None:
    # Sent as a worker (or beat) imports its task modules. Connected before the app exists, so it runs before Celery's
    # Django fixup, which sets Django up on the same signal. A worker serves no admin pages: importing every app's
    # admin module (and behind them DRF serializers, rapidfuzz, PostgreSQL form fields) only made each crawl pool
    # process heavier (bench/README.md, "A lighter worker"). The admin's models and permissions stay installed.
    from django.apps import apps
    from django.conf import settings

    if apps.ready:  # Django already set up in this process (a test calling the loader): leave it as it is
        return
    admin = "django.contrib.admin"
    settings.INSTALLED_APPS = [
        f"{admin}.apps.SimpleAdminConfig" if app == admin else app for app in settings.INSTALLED_APPS
    ]


app = Celery("trawl")
app.config_from_object("celeryconfig")
app.autodiscover_tasks()


@worker_init.connect(weak=False)
def hide_environment(**_kwargs) -> None:
    # In the main process, before the pool forks: no process of the worker lets a packaged crawl's child (same user,
    # crawls.scraping.child_env) read the worker's secrets from its /proc/<pid>/environ.
    from crawls.scraping.child_env import undumpable

    undumpable()


@worker_process_init.connect(weak=False)
def start_reactor(**_kwargs) -> None:
    # The reactor must be installed in the pool process itself, never in the parent that forks it.
    from crawls.scraping.runtime import ensure_reactor

    ensure_reactor()


@worker_process_shutdown.connect(weak=False)
def close_browser(**_kwargs) -> None:
    # A pool process that rendered pages closes its Chromium as it exits (a SIGKILLed one: see rendering/browser.py).
    from crawls.scraping.rendering.browser import browser_close

    browser_close()


@beat_init.connect(weak=False)
def quiet_beat(**_kwargs) -> None:
    # Beat publishes only housekeeping (the reaper every 15 s, samples every 30 s, sweeps, dispatch): no `task-sent`
    # events from it, so Flower lists crawls. Crawls are published by web and ops processes, which keep theirs.
    app.conf.task_send_sent_event = False


@worker_shutting_down.connect(weak=False)
def hand_crawls_back(**_kwargs) -> None:
    # A warm shutdown (SIGTERM) requeues running crawls at once instead of waiting for them (crawls/shutdown.py).
    from crawls.shutdown import forward_to_pool

    forward_to_pool()
