"""The Celery app. Workers import this; what a worker does for crawls as it starts and stops is connected by
crawls itself (crawls/worker/signals.py, from its AppConfig), so this module imports no app."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, import_modules

from project.messaging.broker_patches import kombu_redis_patch
from project.presence import PresenceStep

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Celery's Django fixup runs Django's system checks as a worker starts; their URL check imports the whole URLconf
# (every API view, DRF, drf-spectacular, Jinja2 behind django.test...) into every worker and its pool processes, to
# check URLs a worker never serves. `manage.py migrate` and the web run them.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")
kombu_redis_patch()  # before any broker connection: a Redis restart must not end the worker (see the module)


# Apps only beat uses (its database scheduler's models, and behind them timezone_field's and cron_descriptor's): a
# worker started by project/worker.py, which sets `worker_process`, leaves them out of Django's apps — ~3 MiB of the
# worker and of each crawl pool process it forks (bench/README.md, issue 33). Workers read and write none of their
# tables; migrations (which create beat's periodic tasks) run in `manage.py migrate`, never in a worker.
BEAT_ONLY_APPS = ("django_celery_beat",)
worker_process = False


@import_modules.connect(weak=False)
def without_admin_autodiscovery(**_kwargs) -> None:
    # Sent as a worker (or beat) imports its task modules. Connected before the app exists, so it runs before Celery's
    # Django fixup, which sets Django up on the same signal. A worker serves no admin pages: importing every app's
    # admin module (and behind them DRF serializers, rapidfuzz, PostgreSQL form fields) would only make each crawl
    # pool process heavier (measured in bench/README.md, issue 33). The admin's models and permissions stay installed.
    from django.apps import apps
    from django.conf import settings

    if apps.ready:  # Django already set up in this process (a test calling the loader): leave it as it is
        return
    admin = "django.contrib.admin"
    left_out = BEAT_ONLY_APPS if worker_process else ()
    settings.INSTALLED_APPS = [
        f"{admin}.apps.SimpleAdminConfig" if app == admin else app
        for app in settings.INSTALLED_APPS
        if app not in left_out
    ]


app = Celery("trawl")
app.config_from_object("celeryconfig")
app.autodiscover_tasks()
app.steps["worker"].add(PresenceStep)


@beat_init.connect(weak=False)
def quiet_beat(**_kwargs) -> None:
    # Beat publishes only housekeeping (the reaper every 15 s, samples every 30 s, sweeps, dispatch): no `task-sent`
    # events from it, so Flower lists crawls. Crawls are published by web and ops processes, which keep theirs.
    app.conf.task_send_sent_event = False
