"""The items API serves bounded pages (issue 41): an item may be large, so `?limit=` above TRAWL_API_MAX_PAGE_SIZE
(200) gets 200 rows and a `next` link, not a thousand items in one answer."""

from __future__ import annotations

import pytest
from django.conf import settings

from items.models import Item
from registry.models import Scraper

pytestmark = pytest.mark.django_db


def test_a_page_of_items_holds_at_most_the_max_page_size(api, requester):
    scraper = Scraper.objects.create(name="pages")
    Item.objects.bulk_create(
        Item(scraper=scraper, tenant=requester, fingerprint=f"f{n}", content_hash=f"h{n}", data={"n": n})
        for n in range(250)
    )

    page = api.get("/api/items/?limit=1000").json()

    assert settings.TRAWL_API_MAX_PAGE_SIZE == 200
    assert page["count"] == 250
    assert len(page["results"]) == 200
    assert "offset=200" in page["next"]
    assert len(api.get("/api/items/?limit=1000&offset=200").json()["results"]) == 50
