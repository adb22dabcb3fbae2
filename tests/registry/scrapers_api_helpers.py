"""The fixtures and helpers of the `/api/scrapers/` tests (tests/registry/test_api_scrapers_*.py): an ops client, the
`shop` scraper, a version added through the API, each version's traffic."""

from __future__ import annotations

import pytest

from registry.models import ScraperVersion
from tests.clients import client_for
from tests.registry.factories import LINK_SPIDER


@pytest.fixture
def ops():
    return client_for("ops", admin=True)


@pytest.fixture
def shop(ops):
    response = ops.post("/api/scrapers/", {"name": "shop", "description": "The shop"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def add_version(ops, version, *, scraper="shop", expect=201, **fields):
    body = {"version": version, "variant": "stable", "spider": LINK_SPIDER, **fields}
    response = ops.post(f"/api/scrapers/{scraper}/versions/", body, format="json")
    assert response.status_code == expect, response.content
    return response.json()


def traffic(scraper="shop") -> dict[str, int]:
    return {v.version: v.traffic_pct for v in ScraperVersion.objects.filter(scraper__name=scraper)}
