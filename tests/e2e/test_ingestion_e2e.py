"""A real worker crawls a local shop twice; between the crawls one price changes and one product loses its price."""

from __future__ import annotations

import pytest

from items.models import Item, ItemPriceChange
from registry.models import Scraper, ScraperVersion
from tests.sites import LocalSite, write_catalogue

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCHEMA = {"required": ["title", "price"], "fields": {"title": "str", "price": "decimal", "image": "url"}}
CONFIG = {
    "item_links": "a.product",
    "next_page": "a.next",
    "fields": {"title": "h1", "price": ".price", "image": "img::attr(src)"},  # whole elements: markup is stripped
}


def rouble_price(n: int) -> str:
    return f"{n} 299,00 ₽"


@pytest.fixture
def shop(tmp_path):
    write_catalogue(tmp_path, products=6, per_page=3, price_of=rouble_price)
    with LocalSite(tmp_path) as local_site:
        yield local_site


@pytest.fixture
def schema_scraper(db):
    scraper = Scraper.objects.create(name="priced_shop")
    ScraperVersion.objects.create(
        scraper=scraper,
        version="1.0.0",
        spider="runtime.spiders.selectors.SelectorsSpider",
        is_default=True,
        settings={"TRAWL_ITEM_SCHEMA": SCHEMA},
    )
    return scraper


def crawl(api, job_waiter, shop):
    spec = {"url": f"{shop.url}/list-1.html", "scraper": "priced_shop", "options": {"config": CONFIG}}
    response = api.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    job = job_waiter(response.json()["id"])
    assert job.status == "succeeded", job.error_message
    return job


def test_recrawl_reports_one_changed_price_and_one_invalid_item(api, schema_scraper, shop, job_waiter):
    first = crawl(api, job_waiter, shop)
    page = shop.root / "product-2.html"
    page.write_text(page.read_text().replace(rouble_price(2), "2 349,50 ₽"))
    page = shop.root / "product-5.html"
    page.write_text(page.read_text().replace(rouble_price(5), "sold out"))

    second = crawl(api, job_waiter, shop)

    assert (first.stats["items_new"], first.stats["items_invalid"]) == (6, 0)
    counts = {key: second.stats[key] for key in ("items_new", "items_changed", "items_unchanged", "items_invalid")}
    assert counts == {"items_new": 0, "items_changed": 1, "items_unchanged": 4, "items_invalid": 1}
    assert second.stats["invalid_sample"][0]["url"] == f"{shop.url}/product-5.html"
    assert second.stats["invalid_sample"][0]["reasons"] == ["price: no price in 'sold out'"]
    change = ItemPriceChange.objects.get()
    assert change.item.url == f"{shop.url}/product-2.html"
    assert (change.old_price, change.new_price, change.new_currency) == ("2299.00", "2349.50", "RUB")
    assert Item.objects.get(url=f"{shop.url}/product-1.html").data == {
        "title": "Product 1",
        "price": "1299.00",
        "currency": "RUB",
        "image": f"{shop.url}/img/1.png",
        "url": f"{shop.url}/product-1.html",
    }
    exported = api.get(f"/api/jobs/{second.pk}/items/?format=jsonl")
    assert len(b"".join(exported.streaming_content).splitlines()) == 5
