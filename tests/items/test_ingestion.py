"""Ingestion: items are checked against their version's schema and normalized; invalid ones never reach Item."""

from __future__ import annotations

from decimal import Decimal

import pytest

from crawls.models import CrawlJob
from items.ingestion import Ingestion, ItemSchema, item_clean, job_schema, price_parse
from items.models import Item
from registry.models import Scraper, ScraperVersion
from tests.items.upserts import job_items_upsert

SCHEMA = ItemSchema.from_setting(
    {"required": ["title", "price"], "fields": {"title": "str", "price": "decimal", "image": "url"}}
)


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [
        ("1 299,00 ₽", "1299.00", "RUB"),
        ("$1,299.00", "1299.00", "USD"),
        ("1.299 €", "1299", "EUR"),
        ("22.70 €", "22.70", "EUR"),
        ("£1,049.99", "1049.99", "GBP"),
        ("1 299,00 руб.", "1299.00", "RUB"),
        ("USD 5.50", "5.50", "USD"),
        ("€1.299,50", "1299.50", "EUR"),
    ],
)
def test_each_price_format_parses_to_amount_and_iso_currency(text, amount, currency):
    parsed = price_parse(text)

    assert (parsed.amount, parsed.currency) == (Decimal(amount), currency)


def test_price_without_currency_takes_the_default_and_no_amount_is_none():
    assert price_parse("12.50", default_currency="USD").currency == "USD"
    assert price_parse("Call for price") is None


def test_valid_item_is_normalized():
    raw = {
        "url": "/p/1",
        "title": "  <b>Funny</b>\n  mug&nbsp;&amp; saucer ",
        "price": "<span>$1,299.00</span>",
        "image": "../img/1.png",
        "category": " Mugs  <i>&</i> cups ",
        "_depth": 2,
    }

    clean, reasons = item_clean(raw, schema=SCHEMA, base_url="http://shop.test/c/list.html")

    assert reasons == []
    assert clean == {
        "url": "http://shop.test/p/1",
        "title": "Funny mug & saucer",
        "price": "1299.00",
        "currency": "USD",
        "image": "http://shop.test/img/1.png",
        "category": "Mugs & cups",
        "_depth": 2,
    }


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"url": "http://s.test/1", "price": "$5"}, "title: required but missing"),
        ({"url": "http://s.test/1", "title": "  <br> ", "price": "$5"}, "title: required but missing"),
        ({"url": "http://s.test/1", "title": "Mug", "price": "sold out"}, "price: no price in 'sold out'"),
        ({"url": "http://s.test/1", "title": ["a", "b"], "price": "$5"}, "title: expected str, got list"),
        (
            {"url": "http://s.test/1", "title": "Mug", "price": "$5", "image": "javascript:alert(1)"},
            "image: not an http(s) URL: 'javascript:alert(1)'",
        ),
    ],
)
def test_invalid_items_are_rejected_with_a_reason(item, reason):
    _, reasons = item_clean(item, schema=SCHEMA)

    assert reasons == [reason]


def test_conversion_to_a_base_currency_is_stored_apart_from_the_compared_content():
    schema = ItemSchema.from_setting(
        {"fields": {"price": "price"}, "base_currency": "EUR", "rates": {"USD": "0.5"}}, rates={"GBP": "1.2"}
    )

    usd, _ = item_clean({"url": "http://s.test/1", "price": "$1,299.00"}, schema=schema)
    gbp, _ = item_clean({"url": "http://s.test/2", "price": "£10"}, schema=schema)
    rub, _ = item_clean({"url": "http://s.test/3", "price": "10 ₽"}, schema=schema)

    assert (usd["price"], usd["currency"]) == ("1299.00", "USD")
    assert (usd["_price_base"], usd["_base_currency"]) == ("649.50", "EUR")
    assert gbp["_price_base"] == "12.00"
    assert "_price_base" not in rub  # no rate: only the original price


def test_unknown_schema_type_rejects_with_a_message_that_names_it():
    schema = ItemSchema.from_setting({"fields": {"price": "money"}})

    _, reasons = item_clean({"price": "$1"}, schema=schema)

    assert "unknown type 'money'" in reasons[0]


@pytest.mark.parametrize("setting", [["title"], {"fields": ["title"]}, {"required": "title"}])
def test_malformed_schema_setting_rejects_every_item_saying_what_shape_it_needs(setting):
    _, reasons = item_clean({"title": "Mug"}, schema=ItemSchema.from_setting(setting))

    assert reasons == ['TRAWL_ITEM_SCHEMA must look like {"required": [...], "fields": {"name": "type"}}']


@pytest.mark.django_db
def test_version_schema_rejects_counts_and_samples_and_only_valid_items_are_upserted():
    scraper = Scraper.objects.create(name="shop", settings={"TRAWL_ITEM_SCHEMA": {"required": ["url"]}})
    version = ScraperVersion.objects.create(
        scraper=scraper,
        version="1.0.0",
        spider="runtime.spiders.link.LinkSpider",
        settings={"TRAWL_ITEM_SCHEMA": SCHEMA_SETTING},
    )
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper, version=version)
    ingestion = Ingestion.for_job(scraper_settings=scraper.settings, version_settings=version.settings, url=job.url)
    schema = job_schema(scraper_settings=scraper.settings, version_settings=version.settings)
    assert schema.required == ("title", "price")  # the version's schema overrides the scraper's
    raw = [{"url": f"http://shop.test/{n}", "title": f"Item {n}", "price": f"${n}.00"} for n in range(3)]
    raw += [{"url": f"http://shop.test/bad-{n}", "title": f"Bad {n}"} for n in range(7)]

    counts = job_items_upsert(job=job, items=ingestion.clean(raw))

    assert counts == {"new": 3}
    assert Item.objects.count() == 3
    stats = ingestion.stats()
    assert stats["items_invalid"] == 7
    assert len(stats["invalid_sample"]) == 5
    assert stats["invalid_sample"][0] == {
        "url": "http://shop.test/bad-0",
        "reasons": ["price: required but missing"],
        "item": {"url": "http://shop.test/bad-0", "title": "Bad 0"},
    }


SCHEMA_SETTING = {"required": ["title", "price"], "fields": {"title": "str", "price": "decimal", "image": "url"}}


@pytest.mark.django_db
def test_without_a_schema_items_pass_as_they_are():
    scraper = Scraper.objects.create(name="plain")
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper)
    raw = [{"url": "/relative", "title": " <b>x</b> "}]

    assert Ingestion.for_job(scraper_settings=scraper.settings, version_settings=None, url=job.url).clean(raw) == raw
