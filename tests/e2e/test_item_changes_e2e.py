"""Field-level history end to end: a real crawl worker re-crawls a local page whose fields change between runs.

A page crawled twice with its price and title changed shows both fields' old and new values at /changes/, sends one
signed `item.changed` to a watch whose rule (price down 5 %) it meets and none to one it does not; each job's export
gives its own values and the two jobs' diff names the fields. A field rotated on every run is volatile by the third
run and makes no change from then on.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from access.models import Requester
from callbacks.models import Delivery
from callbacks.signing import signature_verify
from crawls.models import CrawlJob
from items.models import Item
from sources.services.sources import source_crawl_now, source_create
from tests.callbacks.harness import Receiver
from tests.sites import ServedSite, send_body

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FIELDS = {"title": "h1::text", "price": ".price::text", "banner": ".banner::text"}


class ProductSite(ServedSite):
    """One product page whose title, price and banner a test sets between crawls."""

    def __init__(self) -> None:
        self.fields = {"title": "Widget", "price": "100.00", "banner": "Sale 0"}
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/product.html":
                    send_body(self, 404, "no")
                    return
                with site.lock:
                    page = site.fields
                    body = (
                        f"<html><body><h1>{page['title']}</h1><span class='price'>{page['price']}</span>"
                        f"<div class='banner'>{page['banner']}</div></body></html>"
                    )
                send_body(self, 200, body)

            def log_message(self, *args):
                pass

        super().__init__(Handler)

    def set(self, **fields: str) -> None:
        with self.lock:
            self.fields = {**self.fields, **fields}


@pytest.fixture
def product():
    with ProductSite() as site:
        yield site


@pytest.fixture
def receivers():
    with Receiver() as met, Receiver() as unmet:
        yield met, unmet


def crawl(source, job_waiter) -> CrawlJob:
    job = job_waiter(source_crawl_now(source=source).pk, timeout=120)
    assert job.status == "succeeded", job.error_message
    return job


def export(admin_api, job: CrawlJob) -> list[dict]:
    response = admin_api.get(f"/api/jobs/{job.pk}/items/?format=jsonl")
    assert response.status_code == 200
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def test_price_and_title_changed_show_at_changes_send_one_event_and_each_job_exports_its_own(
    builtins, product, receivers, admin_api, job_waiter
):
    met, unmet = receivers
    source = source_create(url=f"{product.url}/product.html", scraper="selectors", config={"fields": FIELDS})
    # The unmet watch first: by the time the met one's event is stored, the unmet one was judged too.
    for receiver, rules in ((unmet, [{"field": "stock", "appears": True}]), (met, [{"field": "price", "drop_pct": 5}])):
        body = {"source": source.pk, "target_url": receiver.url, "rules": rules}
        response = admin_api.post("/api/item-watches/", body, format="json")
        assert response.status_code == 201, response.content

    first = crawl(source, job_waiter)
    product.set(title="Widget Pro", price="90.00")
    second = crawl(source, job_waiter)

    assert second.stats["items_changed"] == 1
    item = Item.objects.get(scraper__name="selectors", url=f"{product.url}/product.html")
    changes = admin_api.get(f"/api/items/{item.pk}/changes/").json()["results"]
    moved = {row["field"]: (row["old"], row["new"], row["job"]) for row in changes}
    assert moved == {"price": ("100.00", "90.00", str(second.pk)), "title": ("Widget", "Widget Pro", str(second.pk))}

    met.wait_for(lambda r: r.events("item.changed"), timeout=60, why="item.changed to the price rule")
    [event] = met.events("item.changed")
    secret = Requester.objects.get(name="root").webhook_secret  # the watch's owner (admin_api's requester)
    assert signature_verify(secret=secret, body=event.body, header=event.headers["X-Trawl-Signature"])
    assert event.headers["X-Trawl-Delivery"] == str(Delivery.objects.get(event="item.changed").pk)
    data = event.json["data"]
    assert data["item"]["id"] == item.pk and data["job"]["id"] == str(second.pk)
    assert data["matched"] == [{"field": "price", "drop_pct": 5}]
    assert Delivery.objects.filter(event="item.changed").count() == 1 and not unmet.events()

    assert [row["data"]["price"] for row in export(admin_api, first)] == ["100.00"]
    assert [row["data"]["title"] for row in export(admin_api, second)] == ["Widget Pro"]
    page = admin_api.get(f"/api/jobs/{first.pk}/items/").json()["results"]
    assert page[0]["data"]["title"] == "Widget"
    diff = admin_api.get(f"/api/jobs/{first.pk}/diff/{second.pk}/").json()
    assert diff["added"] == [] and diff["removed"] == []
    assert {(f["field"], f["old"], f["new"]) for f in diff["changed"][0]["fields"]} == {
        ("price", "100.00", "90.00"),
        ("title", "Widget", "Widget Pro"),
    }


def test_a_field_rotated_on_every_run_is_volatile_by_the_third_and_stops_producing_changes(
    builtins, product, admin_api, job_waiter
):
    source = source_create(url=f"{product.url}/product.html", scraper="selectors", config={"fields": FIELDS})
    jobs = []
    for run in range(4):
        product.set(banner=f"Sale {run}")
        jobs.append(crawl(source, job_waiter))

    assert [job.stats["items_changed"] for job in jobs] == [0, 1, 0, 0]
    assert [job.stats["items_unchanged"] for job in jobs] == [0, 0, 1, 1]
    volatile = admin_api.get(f"/api/sources/{source.pk}/volatile-fields/").json()
    assert volatile["observed"] == ["banner"] and volatile["effective"] == ["banner"]
    item = Item.objects.get(scraper__name="selectors", url=f"{product.url}/product.html")
    assert item.data["banner"] == "Sale 3"  # stored, just not a change
    changes = admin_api.get(f"/api/items/{item.pk}/changes/").json()["results"]
    assert [(row["field"], row["new"]) for row in changes] == [("banner", "Sale 1")]  # the second run's, no later
    everything = admin_api.get(f"/api/items/{item.pk}/changes/?volatile=true").json()["results"]
    assert [(row["new"], row["volatile"]) for row in everything] == [
        ("Sale 3", True),
        ("Sale 2", True),
        ("Sale 1", False),
    ]
    # Each job still exports the banner it saw.
    assert [export(admin_api, job)[0]["data"]["banner"] for job in jobs] == [f"Sale {n}" for n in range(4)]
