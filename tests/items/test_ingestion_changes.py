"""Change tracking on normalized content: price history per item, GET /api/items/?changed_since=, job exports."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from access.services import token_issue
from crawls.models import CrawlJob
from items.ingestion import Ingestion, ItemSchema
from items.models import Item, ItemPriceChange
from registry.models import Scraper
from tests.items.upserts import job_items_upsert

pytestmark = pytest.mark.django_db
SCHEMA = ItemSchema.from_setting({"required": ["title", "price"], "fields": {"title": "str", "price": "decimal"}})


@pytest.fixture
def scraper(db):
    return Scraper.objects.create(name="shop")


def crawl(scraper, pages: dict[str, tuple[str, str]], *, requester=None):
    """One job that saw `pages` ({url: (title, price text)}), normalized as a schema'd version would be."""
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper, requester=requester)
    raw = [{"url": url, "title": title, "price": price} for url, (title, price) in pages.items()]
    return job, job_items_upsert(job=job, items=Ingestion(schema=SCHEMA).clean(raw))


CATALOGUE = {
    "http://shop.test/1": ("Mug", "$12.00"),
    "http://shop.test/2": ("Teapot", "1 299,00 ₽"),
    "http://shop.test/3": ("Kettle", "22.70 €"),
}


def test_recrawl_with_one_changed_price_reports_one_changed_item_and_records_old_and_new_price(scraper):
    crawl(scraper, CATALOGUE)
    moved = {**CATALOGUE, "http://shop.test/2": ("Teapot", "1 349,50 ₽")}

    second, counts = crawl(scraper, moved)

    assert counts == {"changed": 1, "unchanged": 2}
    change = ItemPriceChange.objects.get()
    assert change.item.url == "http://shop.test/2"
    assert (change.old_price, change.old_currency, change.new_price, change.new_currency) == (
        "1299.00",
        "RUB",
        "1349.50",
        "RUB",
    )
    assert change.job == second


def test_markup_or_whitespace_around_the_same_price_is_not_a_change(scraper):
    crawl(scraper, CATALOGUE)
    noisy = {url: (f"  <b>{title}</b>\n", f"<span> {price} </span>") for url, (title, price) in CATALOGUE.items()}

    _, counts = crawl(scraper, noisy)

    assert counts == {"unchanged": 3}
    assert not ItemPriceChange.objects.exists()


def test_title_change_is_a_change_without_a_price_change(scraper):
    crawl(scraper, CATALOGUE)

    _, counts = crawl(scraper, {**CATALOGUE, "http://shop.test/1": ("Big mug", "$12.00")})

    assert counts == {"changed": 1, "unchanged": 2}
    assert not ItemPriceChange.objects.exists()


def test_price_history_keeps_the_latest_n(scraper, settings):
    settings.TRAWL_INGESTION_PRICE_HISTORY = 3
    for cents in range(6):
        crawl(scraper, {"http://shop.test/1": ("Mug", f"$12.0{cents}")})

    history = list(ItemPriceChange.objects.values_list("old_price", "new_price"))

    assert history == [("12.04", "12.05"), ("12.03", "12.04"), ("12.02", "12.03")]


def test_items_changed_since_lists_the_requesters_items_with_price_history(scraper, api, requester):
    crawl(scraper, CATALOGUE, requester=requester)
    Item.objects.update(changed_at=timezone.now() - timedelta(days=2))
    since = timezone.now() - timedelta(hours=1)
    crawl(scraper, {**CATALOGUE, "http://shop.test/3": ("Kettle", "24.00 €")}, requester=requester)

    response = api.get("/api/items/", {"changed_since": since.isoformat()})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 1
    item = body["results"][0]
    assert item["url"] == "http://shop.test/3"
    assert item["data"]["price"] == "24.00"
    assert [(p["old_price"], p["new_price"], p["new_currency"]) for p in item["price_history"]] == [
        ("22.70", "24.00", "EUR")
    ]
    assert api.get("/api/items/").json()["count"] == 3


def test_items_of_other_requesters_jobs_are_not_listed_but_admins_see_all(scraper, api):
    other, _ = token_issue(requester_name="bob")
    crawl(scraper, CATALOGUE, requester=other)
    _, admin_token = token_issue(requester_name="root", admin=True)

    assert api.get("/api/items/").json()["count"] == 0
    api.credentials(HTTP_AUTHORIZATION=f"Token {admin_token}")
    assert api.get("/api/items/").json()["count"] == 3


def test_bad_changed_since_is_a_400_that_says_why(api):
    response = api.get("/api/items/", {"changed_since": "yesterday"})

    assert response.status_code == 400
    assert "ISO 8601" in response.json()["changed_since"][0]


def test_job_items_stream_as_json_lines_and_csv(scraper, api, requester):
    job, _ = crawl(scraper, CATALOGUE, requester=requester)

    jsonl = api.get(f"/api/jobs/{job.pk}/items/", {"format": "jsonl"})
    as_csv = api.get(f"/api/jobs/{job.pk}/items/?format=csv")
    page = api.get(f"/api/jobs/{job.pk}/items/")

    assert jsonl.status_code == as_csv.status_code == page.status_code == 200
    assert jsonl.streaming and jsonl["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(jsonl.streaming_content).decode().splitlines()]
    assert sorted(line["data"]["title"] for line in lines) == ["Kettle", "Mug", "Teapot"]
    assert {line["change"] for line in lines} == {"new"}
    rows = list(csv.DictReader(io.StringIO(b"".join(as_csv.streaming_content).decode())))
    assert sorted((row["data.title"], row["data.price"], row["data.currency"]) for row in rows) == [
        ("Kettle", "22.70", "EUR"),
        ("Mug", "12.00", "USD"),
        ("Teapot", "1299.00", "RUB"),
    ]
    assert page.json()["count"] == 3


def test_export_of_someone_elses_job_is_not_found(scraper, api):
    other, _ = token_issue(requester_name="bob")
    job, _ = crawl(scraper, CATALOGUE, requester=other)

    assert api.get(f"/api/jobs/{job.pk}/items/?format=csv").status_code == 404


@pytest.mark.parametrize(
    "odd", ["9726-04-28T01:21:35-17:14", "2026-13-01T00:00:00", "9999-12-31T23:59:59-23:00", "2026-01-01T00:00:00"]
)
def test_any_changed_since_is_answered_never_a_500(api, odd):
    # Found by the API fuzzer on PostgreSQL, which refuses offsets beyond ±15:59 and years past 9999.
    response = api.get("/api/items/", {"changed_since": odd})

    assert response.status_code in (200, 400), response.content


def test_pruning_price_history_costs_the_same_few_queries_for_one_item_or_fifty(scraper, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.TRAWL_INGESTION_PRICE_HISTORY = 2

    def queries_for(count: int) -> int:
        pages = {f"http://shop.test/q{count}-{n}": ("Mug", "$1.00") for n in range(count)}
        crawl(scraper, pages)
        for cents in range(3):  # three price moves each, so every item has history to prune
            moved = {url: ("Mug", f"$1.1{cents}") for url in pages}
            with CaptureQueriesContext(connection) as captured:
                crawl(scraper, moved)
        return len(captured)

    assert queries_for(50) == queries_for(1)
    assert ItemPriceChange.objects.filter(item__url__startswith="http://shop.test/q50-").count() == 100
