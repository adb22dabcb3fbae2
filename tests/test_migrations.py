"""A database made before the crawls app was split migrates forward with its data."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from crawls.models import CrawlJob
from items.models import Item, ItemSighting
from sources.models import Source
from throttling.models import DomainThrottle, Proxy

BEFORE_SPLIT = [
    ("crawls", "0007_ingestion"),
    ("sources", None),
    ("throttling", None),
    ("items", None),
]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    state_at = [target for target in targets if target[1] is not None] + [
        ("contenttypes", "0002_remove_content_type_name")
    ]
    return executor.loader.project_state(state_at).apps


@pytest.mark.django_db(transaction=True)
def test_rows_made_at_the_pre_split_schema_are_read_through_the_new_apps():
    old = migrate(BEFORE_SPLIT)
    try:
        _fill_and_migrate_forward(old)
    finally:  # the rest of the suite runs at the newest schema, whatever happened here
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def _fill_and_migrate_forward(old):
    scraper = old.get_model("registry", "Scraper").objects.create(name="legacy")
    source = old.get_model("crawls", "Source").objects.create(url="http://old.test/", scraper=scraper)
    job = old.get_model("crawls", "CrawlJob").objects.create(url="http://old.test/", scraper=scraper, source=source)
    item = old.get_model("crawls", "Item").objects.create(
        scraper=scraper, fingerprint="f1", data={"title": "Kettle"}, content_hash="h", last_job=job
    )
    old.get_model("crawls", "ItemSighting").objects.create(job=job, item=item, change="new")
    old.get_model("crawls", "DomainThrottle").objects.create(domain="old.test", rate=0.5)
    old.get_model("crawls", "Proxy").objects.create(url="http://10.0.0.5:3128", egress_label="ip-5")
    content_type = old.get_model("contenttypes", "ContentType")
    content_type.objects.get_or_create(app_label="crawls", model="source")

    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    moved = CrawlJob.objects.select_related("source").get(pk=job.pk)
    assert moved.source == Source.objects.get(url="http://old.test/")
    assert Item.objects.get(fingerprint="f1").data == {"title": "Kettle"}
    assert ItemSighting.objects.get(job_id=job.pk).item.last_job_id == job.pk
    assert DomainThrottle.objects.get(domain="old.test").rate == 0.5
    assert Proxy.objects.get().egress_label == "ip-5"
    assert ContentType.objects.filter(app_label="sources", model="source").exists()
    assert not ContentType.objects.filter(app_label="crawls", model="source").exists()


@pytest.mark.django_db
def test_beat_s_stored_dispatch_schedule_is_renamed_to_the_task_s_own_name_and_back():
    from django.apps import apps
    from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

    renaming = importlib.import_module("sources.migrations.0003_dispatch_task_name")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    stored = PeriodicTask.objects.update_or_create(
        name="dispatch-due-sources", defaults={"task": "crawls.tasks.dispatch_due_sources", "interval": every_minute}
    )[0]
    PeriodicTasks.objects.filter(ident=1).delete()

    renaming.forward(apps, None)
    stored.refresh_from_db()
    assert stored.task == "sources.tasks.dispatch_due_sources"
    assert PeriodicTasks.objects.filter(ident=1).exists(), "a running beat re-reads its schedule"

    renaming.backward(apps, None)
    stored.refresh_from_db()
    assert stored.task == "crawls.tasks.dispatch_due_sources"
