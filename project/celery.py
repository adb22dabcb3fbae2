"""The Celery app. Workers import this; it sets up the Scrapy reactor in every pool process."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("trawl")
app.config_from_object("celeryconfig")
app.autodiscover_tasks()


@worker_process_init.connect(weak=False)
def start_reactor(**_kwargs) -> None:
    # The reactor must be installed in the pool process itself, never in the parent that forks it.
    from crawls.scraping.runtime import ensure_reactor

    ensure_reactor()
