"""Field history through the real upsert: changes per field, volatility per source, a job's items as it stored them,
two jobs' diff, the /changes/ API (tenant-scoped) and `item.changed` events on rules."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from access.tenancy import job_tenant_id
from callbacks.models import Delivery
from crawls.models import CrawlJob
from items.history.diff import jobs_diff
from items.history.notify import item_changed_events_emit, job_history_followup
from items.models import ChangeWatch, Item, ItemFieldChange, ItemSighting, SourceVolatility
from items.selectors import job_item_data
from registry.models import Scraper
from sources.models import Source
from tests.items.upserts import job_items_upsert

pytestmark = pytest.mark.django_db


@pytest.fixture
def source(db):
    return Source.objects.create(url="http://shop.test/list", scraper=Scraper.objects.create(name="shop"))


def run(source, requester=None, *items, sourced: bool = True) -> CrawlJob:
    """One job storing `items`: a run of the source, or (`sourced=False`) an ad-hoc job of its scraper."""
    job = CrawlJob.objects.create(
        url=source.url, scraper=source.scraper, source=source if sourced else None, requester=requester
    )
    job_items_upsert(job=job, items=list(items))
    return job


def test_each_moved_field_is_recorded_with_old_new_and_job(source):
    run(source, None, {"url": "u1", "title": "Old", "price": "10", "_at": 1})
    second = run(source, None, {"url": "u1", "title": "New", "price": "8", "_at": 2})

    changes = ItemFieldChange.objects.order_by("field").values_list("field", "kind", "old", "new", "job", "volatile")
    assert list(changes) == [
        ("price", "changed", "10", "8", second.pk, False),
        ("title", "changed", "Old", "New", second.pk, False),
    ]
    assert ItemSighting.objects.get(job=second).change == "changed"


def test_a_field_rotated_on_every_run_is_volatile_by_the_third_run(source):
    jobs = [run(source, None, {"url": "u1", "title": "Same", "banner": f"ad {n}"}) for n in range(4)]

    changes = {job.pk: ItemSighting.objects.get(job=job).change for job in jobs}
    assert [changes[job.pk] for job in jobs] == ["new", "changed", "unchanged", "unchanged"]
    assert source.volatility.effective == ["banner"]
    assert Item.objects.get().data["banner"] == "ad 3"  # stored all the same
    assert list(ItemFieldChange.objects.order_by("pk").values_list("volatile", flat=True)) == [False, True, True]
    # Admins say otherwise: never volatile, and the next rotation is a change again.
    source.volatility.never = ["banner"]
    source.volatility.save()
    last = run(source, None, {"url": "u1", "title": "Same", "banner": "ad 4"})
    assert ItemSighting.objects.get(job=last).change == "changed"


def test_each_job_gives_the_values_it_stored_and_two_jobs_diff(source):
    first = run(source, None, {"url": "u1", "price": "10", "sections": {"A": "a", "B": "b"}}, {"url": "u2", "v": 1})
    second = run(source, None, {"url": "u1", "price": "12", "sections": {"A": "a", "B": "b2"}}, {"url": "u3", "v": 3})

    assert sorted(job_item_data(job_id=first.pk), key=str) == sorted(
        [{"url": "u1", "price": "10", "sections": {"A": "a", "B": "b"}}, {"url": "u2", "v": 1}], key=str
    )
    assert {"url": "u1", "price": "12", "sections": {"A": "a", "B": "b2"}} in list(job_item_data(job_id=second.pk))
    diff = jobs_diff(job_a=first.pk, job_b=second.pk)
    assert [ref["url"] for ref in diff["added"]] == ["u3"] and [ref["url"] for ref in diff["removed"]] == ["u2"]
    [changed] = diff["changed"]
    assert changed["url"] == "u1"
    assert {(f["field"], f["old"], f["new"]) for f in changed["fields"]} == {
        ("price", "10", "12"),
        ("sections.B", "b", "b2"),
    }


def test_changes_api_lists_newest_first_and_hides_another_requesters_item(requester, api, source):
    # Ad-hoc jobs: no source, so no volatility (a source's price moving on 2 of 3 runs would be volatile).
    run(source, requester, {"url": "u1", "price": "10"}, sourced=False)
    run(source, requester, {"url": "u1", "price": "11"}, sourced=False)
    run(source, requester, {"url": "u1", "price": "12", "stock": 1}, sourced=False)
    item = Item.objects.get()

    response = api.get(f"/api/items/{item.pk}/changes/")
    assert response.status_code == 200, response.content
    rows = [(row["field"], row["old"], row["new"]) for row in response.json()["results"]]
    assert rows[0][0] in ("price", "stock") and rows[-1] == ("price", "10", "11") and len(rows) == 3

    from access.services import token_issue

    _, token = token_issue(requester_name="mallory")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert other.get(f"/api/items/{item.pk}/changes/").status_code == 404


def test_item_changed_events_go_to_the_rules_met_once_per_item_and_job(requester, source, settings):
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = False
    run(source, requester, {"url": "u1", "price": "100", "title": "A"})
    job = run(source, requester, {"url": "u1", "price": "90", "title": "B"})
    drop = ChangeWatch.objects.create(
        requester=requester, target_url="http://hook.test/a", rules=[{"field": "price", "drop_pct": 5}]
    )
    ChangeWatch.objects.create(
        requester=requester, target_url="http://hook.test/b", rules=[{"field": "stock", "appears": True}]
    )

    for _ in range(2):
        item_changed_events_emit(job_id=job.pk, source_id=source.pk, tenant_id=requester.pk)

    [delivery] = Delivery.objects.filter(event="item.changed")
    assert delivery.target_url == drop.target_url and delivery.requester_id == requester.pk
    data = delivery.payload["data"]
    assert data["matched"] == [{"field": "price", "drop_pct": 5}]
    assert {(c["field"], c["old"], c["new"]) for c in data["changes"]} == {("price", "100", "90"), ("title", "A", "B")}


def test_each_item_keeps_its_latest_changes_and_fewer_volatile_ones(source, settings):
    settings.TRAWL_ITEM_CHANGES_MAX, settings.TRAWL_ITEM_VOLATILE_CHANGES_MAX = 4, 1
    SourceVolatility.objects.create(source=source, never=["price"])
    for n in range(6):  # the banner rotates (volatile from the third run on), the price moves on the last runs only
        job = run(source, None, {"url": "u1", "banner": f"ad {n}", "price": str(max(n, 3))})
        job_history_followup(job_id=job.pk, source_id=source.pk, tenant_id=job_tenant_id(requester_id=None))

    kept = ItemFieldChange.objects.order_by("-changed_at", "-pk").values_list("field", "new", "volatile")
    assert list(kept) == [
        ("price", "5", False),
        ("banner", "ad 5", True),
        ("price", "4", False),
        ("banner", "ad 1", False),
    ]
