"""`/api/scrapers/`: splitting traffic between versions, each version's effective share, comparing their outcomes."""

from __future__ import annotations

import pytest

from crawls.models import JobStatus
from registry.models import Scraper, ScraperVersion
from registry.services import version_route
from tests.registry.factories import RAISING_SPIDER, make_job
from tests.registry.scrapers_api_helpers import add_version, ops, shop, traffic

pytestmark = pytest.mark.django_db
__all__ = ["ops", "shop"]  # fixtures


# --- traffic -----------------------------------------------------------------------------------


@pytest.fixture
def split(ops, shop):
    add_version(ops, "1.0.0", is_default=True, traffic_pct=90)
    add_version(ops, "1.1.0", variant="canary", traffic_pct=10)
    add_version(ops, "1.2.0", variant="beta")


def test_put_traffic_replaces_the_split(ops, split):
    response = ops.put("/api/scrapers/shop/traffic/", {"1.0.0": 70, "1.2.0": 30}, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == {"1.2.0": 30, "1.1.0": 0, "1.0.0": 70}
    assert ops.get("/api/scrapers/shop/traffic/").json() == response.json()
    assert ops.get("/api/scrapers/shop/").json()["traffic"] == response.json()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"1.0.0": 80, "1.1.0": 30}, "traffic_pct"),
        ({"1.0.0": 50, "3.0.0": 10}, "3.0.0"),
        ({"1.0.0": 50, "1.1.0": "ten"}, "1.1.0"),
        ({"1.0.0": 150}, "1.0.0"),
        ([90, 10], "traffic"),
        ({}, "traffic"),
    ],
)
def test_an_invalid_split_is_refused_and_changes_nothing(ops, split, body, field):
    response = ops.put("/api/scrapers/shop/traffic/", body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()
    assert traffic() == {"1.0.0": 90, "1.1.0": 10, "1.2.0": 0}


def test_a_sum_over_100_says_what_it_came_to(ops, split):
    response = ops.put("/api/scrapers/shop/traffic/", {"1.0.0": 80, "1.1.0": 30}, format="json")

    assert "110%" in response.json()["traffic_pct"][0]


def test_traffic_of_a_deprecated_version_is_refused(ops, split):
    ops.post("/api/scrapers/shop/versions/1.2.0/deprecate/")

    response = ops.put("/api/scrapers/shop/traffic/", {"1.0.0": 50, "1.2.0": 50}, format="json")

    assert response.status_code == 400
    assert "deprecated" in response.json()["1.2.0"][0]


def test_new_split_routes_the_next_jobs(ops, split):
    ops.put("/api/scrapers/shop/traffic/", {"1.1.0": 100}, format="json")

    scraper = Scraper.objects.get(name="shop")
    assert {version_route(scraper=scraper).version for _ in range(200)} == {"1.1.0"}


# --- comparison --------------------------------------------------------------------------------


def test_compare_returns_each_versions_outcomes(ops, shop):
    add_version(ops, "1.0.0", is_default=True, traffic_pct=90)
    add_version(ops, "1.1.0", variant="canary", spider=RAISING_SPIDER, traffic_pct=10)
    stable, canary = (ScraperVersion.objects.get(scraper__name="shop", version=v) for v in ("1.0.0", "1.1.0"))
    for seconds in (1, 2, 3):
        make_job(stable, items=4, seconds=seconds)
    make_job(canary, status=JobStatus.FAILED, error_class="spider_error", seconds=5)
    make_job(canary, status=JobStatus.SUCCEEDED, items=2, seconds=7)

    rows = {row["version"]: row for row in ops.get("/api/scrapers/shop/compare/?window=1h").json()}
    bad_window = ops.get("/api/scrapers/shop/compare/?window=forever")

    assert rows["1.0.0"] | {"median_duration": round(rows["1.0.0"]["median_duration"], 3)} == {
        "version": "1.0.0",
        "variant": "stable",
        "state": "active",
        "traffic_pct": 90,
        "is_default": True,
        "jobs": 3,
        "succeeded": 3,
        "failed": 0,
        "cancelled": 0,
        "success_rate": 1.0,
        "items_per_job": 4.0,
        "median_duration": 2.0,
        "error_classes": {},
        "rollback_reason": "",
    }
    assert (rows["1.1.0"]["jobs"], rows["1.1.0"]["success_rate"], rows["1.1.0"]["items_per_job"]) == (2, 0.5, 1.0)
    assert rows["1.1.0"]["median_duration"] == pytest.approx(6.0)
    assert rows["1.1.0"]["error_classes"] == {"spider_error": 1}
    assert bad_window.status_code == 400 and "window" in bad_window.json()


def test_scraper_detail_shows_each_versions_effective_share_default_takes_what_the_others_leave(ops, shop):
    add_version(ops, "1.0.0", is_default=True)
    add_version(ops, "1.1.0", variant="canary", traffic_pct=10)
    add_version(ops, "1.2.0", variant="beta")

    body = ops.get("/api/scrapers/shop/").json()

    assert body["traffic"] == {"1.0.0": 0, "1.1.0": 10, "1.2.0": 0}
    assert body["effective_share"] == {"1.0.0": 90.0, "1.1.0": 10.0, "1.2.0": 0.0}


def test_without_a_default_versions_with_traffic_share_everything_by_weight(ops, shop):
    add_version(ops, "1.0.0", traffic_pct=30)
    add_version(ops, "1.1.0", variant="canary", traffic_pct=10)

    assert ops.get("/api/scrapers/shop/").json()["effective_share"] == {"1.0.0": 75.0, "1.1.0": 25.0}
