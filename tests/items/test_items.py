"""Item upserts: re-crawls update instead of duplicating, and each job knows what was new, changed or unchanged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from crawls.models import CrawlJob
from items.models import Item, ItemSighting
from items.services import content_hash, item_fingerprint
from registry.models import Scraper
from tests.items.upserts import job_items_upsert

pytestmark = pytest.mark.django_db


@pytest.fixture
def scraper(db):
    return Scraper.objects.create(name="shop")


@pytest.fixture
def new_job(scraper):
    def make(on=None):
        return CrawlJob.objects.create(url="http://shop.test/", scraper=on or scraper)

    return make


def sightings(job) -> dict[str, str]:
    return {s.item.url or s.item.data.get("title"): s.change for s in ItemSighting.objects.filter(job=job)}


def test_first_crawl_counts_every_item_new(new_job):
    job = new_job()

    counts = job_items_upsert(job=job, items=[{"url": "http://shop.test/1"}, {"url": "http://shop.test/2"}])

    assert counts == {"new": 2}
    assert Item.objects.count() == 2
    assert sightings(job) == {"http://shop.test/1": "new", "http://shop.test/2": "new"}
    assert set(Item.objects.values_list("last_job", flat=True)) == {job.pk}


def test_recrawl_counts_new_changed_and_unchanged(new_job):
    job_items_upsert(job=new_job(), items=[{"url": "u1", "price": "1"}, {"url": "u2", "price": "2"}])
    second = new_job()

    counts = job_items_upsert(
        job=second, items=[{"url": "u1", "price": "1"}, {"url": "u2", "price": "3"}, {"url": "u3", "price": "4"}]
    )

    assert counts == {"new": 1, "changed": 1, "unchanged": 1}
    assert Item.objects.count() == 3
    assert Item.objects.get(url="u2").data == {"url": "u2", "price": "3"}
    assert sightings(second) == {"u1": "unchanged", "u2": "changed", "u3": "new"}


def test_changed_items_move_changed_at_and_unchanged_only_last_seen(new_job):
    job_items_upsert(job=new_job(), items=[{"url": "same", "v": 1}, {"url": "moves", "v": 1}])
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Item.objects.update(first_seen=an_hour_ago, last_seen=an_hour_ago, changed_at=an_hour_ago)
    second = new_job()

    job_items_upsert(job=second, items=[{"url": "same", "v": 1}, {"url": "moves", "v": 2}])

    same, moves = Item.objects.get(url="same"), Item.objects.get(url="moves")
    assert same.changed_at == an_hour_ago
    assert same.last_seen > an_hour_ago
    assert moves.changed_at > an_hour_ago
    assert same.first_seen == moves.first_seen == an_hour_ago
    assert same.last_job_id == moves.last_job_id == second.pk


def test_same_fingerprint_twice_in_a_batch_is_one_item_with_the_last_data(new_job):
    job = new_job()

    counts = job_items_upsert(job=job, items=[{"url": "u", "price": "1"}, {"url": "u", "price": "2"}])

    assert counts == {"new": 1}
    assert Item.objects.get().data["price"] == "2"
    assert ItemSighting.objects.filter(job=job).count() == 1


def test_id_identifies_an_item_even_when_its_url_changes(new_job):
    job_items_upsert(job=new_job(), items=[{"id": 7, "url": "http://shop.test/old", "title": "A"}])

    counts = job_items_upsert(job=new_job(), items=[{"id": 7, "url": "http://shop.test/new", "title": "A"}])

    assert counts == {"changed": 1}
    assert Item.objects.get().url == "http://shop.test/new"


def test_sku_identifies_an_item_when_there_is_no_id(new_job):
    job_items_upsert(job=new_job(), items=[{"sku": "X-1", "url": "a"}])

    assert job_items_upsert(job=new_job(), items=[{"sku": "X-1", "url": "b"}]) == {"changed": 1}
    assert Item.objects.count() == 1


def test_explicit_fingerprint_field_wins(new_job):
    job_items_upsert(job=new_job(), items=[{"fingerprint": "k", "id": 1}])

    assert job_items_upsert(job=new_job(), items=[{"fingerprint": "k", "id": 2}]) == {"changed": 1}


def test_items_without_identity_are_identified_by_content(new_job):
    job = new_job()

    counts = job_items_upsert(job=job, items=[{"title": "A"}, {"title": "B"}, {"title": "A"}])

    assert counts == {"new": 2}
    assert job_items_upsert(job=new_job(), items=[{"title": "A"}]) == {"unchanged": 1}


def test_fingerprint_rules():
    assert item_fingerprint({"id": 1, "url": "a"}) == item_fingerprint({"id": 1, "url": "b"})
    assert item_fingerprint({"sku": "s", "url": "a"}) == item_fingerprint({"sku": "s", "url": "b"})
    assert item_fingerprint({"url": "a", "title": "x"}) == item_fingerprint({"url": "a", "title": "y"})
    assert item_fingerprint({"id": "1"}) != item_fingerprint({"sku": "1"})
    assert item_fingerprint({"title": "x"}) != item_fingerprint({"title": "y"})


def test_underscore_keys_do_not_change_the_content_hash():
    assert content_hash({"title": "x", "_crawled_at": 1}) == content_hash({"title": "x", "_crawled_at": 2})
    assert content_hash({"title": "x", "_depth": 1}) == content_hash({"title": "x"})
    assert content_hash({"title": "x"}) != content_hash({"title": "y"})
    assert content_hash({"a": 1, "b": 2}) == content_hash({"b": 2, "a": 1})


def test_underscore_keys_do_not_make_an_item_changed(new_job):
    job_items_upsert(job=new_job(), items=[{"url": "u", "title": "x", "_crawled_at": "2024-01-01"}])

    assert job_items_upsert(job=new_job(), items=[{"url": "u", "title": "x", "_crawled_at": "2024-02-01"}]) == {
        "unchanged": 1
    }


def test_same_fingerprint_under_two_scrapers_is_two_items(new_job):
    other = Scraper.objects.create(name="other")

    job_items_upsert(job=new_job(), items=[{"url": "u"}])
    counts = job_items_upsert(job=new_job(on=other), items=[{"url": "u"}])

    assert counts == {"new": 1}
    assert Item.objects.count() == 2


def test_no_items_writes_nothing(new_job):
    assert job_items_upsert(job=new_job(), items=[]) == {}
    assert Item.objects.count() == 0
    assert ItemSighting.objects.count() == 0


def test_a_chunk_costs_the_same_queries_whatever_its_size(new_job):
    """A crawl stores chunk after chunk in its task thread, beside the crawl: no query per item, and no lookup of ids
    the upsert already returned. (Sizes stay under SQLite's bound on parameters, which splits one INSERT in two.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    item_reads = []

    def queries(job, items) -> int:
        with CaptureQueriesContext(connection) as captured:
            job_items_upsert(job=job, items=items)
        sql = [query["sql"] for query in captured.captured_queries]
        item_reads.append(sum(text.startswith("SELECT") and f'"{Item._meta.db_table}"' in text for text in sql))
        return len(sql)

    queries(new_job(), [{"url": "warm-up"}])  # the system tenant is looked up once, then known
    one = queries(new_job(), [{"url": "a/0"}])
    many = queries(new_job(), [{"url": f"b/{n}"} for n in range(60)])
    again = new_job()
    unchanged = [{"url": f"b/{n}"} for n in range(30)]
    changed = [{"url": f"b/{n}", "title": "new"} for n in range(30, 60)]
    mixed = queries(again, [*unchanged, *changed, {"url": "c/0"}])

    assert many == one
    assert item_reads[1:] == [1, 1, 1]  # what is already known (and locked); the upsert returns the new ids
    # The unchanged items' last_seen: one UPDATE for all of them; the changed items' field history: one INSERT,
    # whatever the number of items (its bound is kept as the job ends).
    assert mixed == one + 1 + 1
    changes = {s.item.url: s.change for s in ItemSighting.objects.filter(job=again).select_related("item")}
    assert len(changes) == 61 and changes["c/0"] == "new" and changes["b/0"] == "unchanged"
    assert changes["b/59"] == "changed" and Item.objects.get(url="b/59").last_job_id == again.pk
