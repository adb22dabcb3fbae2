"""The front doors: `/` is a landing page (the admin's "View site"), `/api/` lists the endpoints."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_api_root_lists_the_endpoints_without_a_token(client):
    response = client.get("/api/")

    assert response.status_code == 200
    endpoints = response.json()["endpoints"]
    assert endpoints["jobs"] == "http://testserver/api/jobs/"
    assert {"batches", "items", "sources", "scrapers", "throttles", "stats", "docs", "health", "metrics"} <= set(
        endpoints
    )
    for name in ("docs", "health"):
        assert client.get(endpoints[name]).status_code == 200, name


def test_landing_page_links_to_the_admin_and_the_api(client):
    response = client.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'href="/admin/"' in html and 'href="/api/"' in html and 'href="/api/docs/"' in html
