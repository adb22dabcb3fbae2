"""rows_upsert: one INSERT ... ON CONFLICT for many rows, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from crawls.models import CrawlJob
from items.bulk import rows_upsert
from items.models import Item, ItemSighting
from items.services import ITEM_COLUMNS, ITEM_COLUMNS_UPDATED
from registry.models import Scraper
from tests.items.upserts import job_items_upsert

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(db):
    return CrawlJob.objects.create(url="http://shop.test/", scraper=Scraper.objects.create(name="shop"))


def item_row(job, tenant_id, fingerprint, data, at):
    return (tenant_id, job.scraper_id, fingerprint, data.get("url", ""), data, "hash", at, at, at, job.pk, None, "")


def test_a_conflicting_row_is_updated_in_place_keeping_first_seen_and_its_id_comes_back(job):
    job_items_upsert(job=job, items=[{"url": "u1", "title": "old"}])
    existing = Item.objects.get()
    later = timezone.now()
    row = item_row(job, existing.tenant_id, existing.fingerprint, {"url": "u1", "title": "new"}, later)

    returned = rows_upsert(
        Item,
        ITEM_COLUMNS,
        [row],
        conflict=("tenant", "scraper", "fingerprint"),
        update=ITEM_COLUMNS_UPDATED,
        returning=("fingerprint", "id"),
    )

    existing_after = Item.objects.get()
    assert existing_after.pk == existing.pk and existing_after.data == {"url": "u1", "title": "new"}
    assert existing_after.first_seen == existing.first_seen < later and existing_after.last_seen == later
    if connection.features.can_return_rows_from_bulk_insert:
        assert returned == [(existing.fingerprint, existing.pk)]


def test_more_rows_than_one_statement_may_bind_are_sent_in_batches(job, monkeypatch):
    """Django bounds a statement's parameters (999 on SQLite; here 600 on both databases): 250 items of 12 columns
    take five INSERTs, and every row arrives with its id."""
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(connection.features, "max_query_params", 600)
    items = [{"url": f"http://shop.test/p/{n}", "title": f"Page {n}", "price": "1.00"} for n in range(250)]

    with CaptureQueriesContext(connection) as captured:
        counts = job_items_upsert(job=job, items=items)

    inserts = [
        query["sql"] for query in captured.captured_queries if query["sql"].startswith('INSERT INTO "crawls_item"')
    ]
    assert len(inserts) == 5
    assert counts == {"new": 250}
    assert Item.objects.count() == 250
    sightings = ItemSighting.objects.filter(job=job).select_related("item")
    assert sorted(s.item.url for s in sightings) == sorted(item["url"] for item in items)
    assert Item.objects.get(url="http://shop.test/p/249").data["title"] == "Page 249"


def test_a_row_missing_a_required_column_is_refused_before_any_sql(job):
    with pytest.raises(ValueError, match="needs a value for content_hash"):
        rows_upsert(Item, [name for name in ITEM_COLUMNS if name != "content_hash"], [()], conflict=("fingerprint",))


def test_without_update_a_conflicting_row_is_left_as_it_was(job):
    job_items_upsert(job=job, items=[{"url": "u1"}])
    item = Item.objects.get()

    rows_upsert(ItemSighting, ("job", "item", "change"), [(job.pk, item.pk, "changed")], conflict=("job", "item"))

    assert list(ItemSighting.objects.values_list("change", flat=True)) == ["new"]
    assert rows_upsert(ItemSighting, ("job", "item", "change"), [], conflict=("job", "item")) == []
