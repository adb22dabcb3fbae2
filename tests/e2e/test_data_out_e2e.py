"""A real worker crawls local pages with the `article` scraper and the `selectors` structured-data fallback; the
items it stores export as Parquet with the rows and values of their JSON-lines export."""

from __future__ import annotations

import pytest

from items.models import Item
from tests.fixtures.pages import FOOTER_TEXT, NAV_TEXT, SIDEBAR_TEXT, article_page, product_page
from tests.items.export_rows import as_parquet_row, jsonl_rows, parquet_rows
from tests.sites import ServedSite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CATALOGUE_CONFIG = {
    "item_links": "a.product",
    "next_page": "a.next",
    "fields": {"title": "h1::text", "price": ".price::text", "image": "img::attr(src)"},
}


@pytest.fixture
def pages():
    routes = {
        "/tides.html": (200, article_page()),
        "/trail-runner-2.html": (200, product_page()),
        "/desk-0.html": (200, "<html><body><p>desk</p></body></html>"),
    }
    with ServedSite(routes) as served:
        served.routes = routes  # the handler reads it on every request: a test changes a page between crawls
        yield served


def crawl(api, job_waiter, **spec):
    response = api.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    job = job_waiter(response.json()["id"])
    assert job.status == "succeeded", job.error_message
    return job


def test_an_article_page_yields_its_main_text_as_markdown_and_a_recrawl_moves_one_section(
    api, builtins, pages, job_waiter
):
    url = f"{pages.url}/tides.html"
    first = crawl(api, job_waiter, url=url, scraper="article")
    before = Item.objects.get(url=url).data
    pages.routes["/tides.html"] = (200, article_page(range_text="seven metres at Boston"))
    second = crawl(api, job_waiter, url=url, scraper="article")
    after = Item.objects.get(url=url).data

    markdown = before["markdown"]
    assert markdown.startswith("# Tides of the North Sea\n\nThe North Sea has some of the most complex tidal patterns")
    for heading in ("## Amphidromic points", "## Tidal range", "### Storm surges"):
        assert f"\n{heading}\n" in markdown
    assert "Storm surges add to the tide when northerly gales push water south" in markdown
    for boilerplate in (*NAV_TEXT, SIDEBAR_TEXT, FOOTER_TEXT):
        assert boilerplate not in markdown
    assert (before["title"], before["published"], before["lang"]) == ("Tides of the North Sea", "2026-03-14", "en-GB")
    assert (first.stats["items_new"], second.stats["items_changed"]) == (1, 1)
    moved = {
        key
        for key in before["sections"].keys() | after["sections"].keys()
        if before["sections"].get(key) != after["sections"].get(key)
    }
    assert moved == {"Tidal range"}
    assert "seven metres at Boston" in after["markdown"]


def test_a_product_page_whose_selector_misses_the_price_gets_it_from_json_ld(api, builtins, pages, job_waiter):
    url = f"{pages.url}/trail-runner-2.html"
    config = {"fields": {"title": "h1.name::text", "price": ".price::text", "currency": ".currency::text"}}

    job = crawl(api, job_waiter, url=url, scraper="selectors", options={"config": config})

    assert Item.objects.get(url=url).data == {
        "title": "Trail Runner 2",
        "price": "89.90",
        "currency": "EUR",
        "url": url,
        "_provenance": {"title": "selector", "price": "json-ld", "currency": "json-ld"},
    }
    assert job.stats["items_new"] == 1


def test_parquet_exports_read_back_with_the_rows_and_values_of_the_json_lines_exports(
    api, builtins, site, pages, job_waiter
):
    shop = crawl(
        api, job_waiter, url=f"{site.url}/list-1.html", scraper="selectors", options={"config": CATALOGUE_CONFIG}
    )
    article = crawl(api, job_waiter, url=f"{pages.url}/tides.html", scraper="article")

    for job in (shop, article):
        as_jsonl = jsonl_rows(api.get(f"/api/jobs/{job.pk}/items/?format=jsonl"))
        as_parquet = parquet_rows(api.get(f"/api/jobs/{job.pk}/items/?format=parquet"))
        assert as_parquet == [as_parquet_row(row) for row in as_jsonl]
    assert len(as_jsonl) == 1 and len(jsonl_rows(api.get(f"/api/jobs/{shop.pk}/items/?format=jsonl"))) == 12

    for query in ("", "&scraper=article"):
        as_jsonl = jsonl_rows(api.get(f"/api/items/?format=jsonl{query}"))
        as_parquet = parquet_rows(api.get(f"/api/items/?format=parquet{query}"))
        assert as_parquet == [as_parquet_row(row) for row in as_jsonl]
        assert len(as_parquet) == (13 if not query else 1)
