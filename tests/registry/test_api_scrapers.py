"""`/api/scrapers/`: registering scrapers and versions, deprecating, promoting and splitting traffic (admins only)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from crawls.models import JobStatus
from registry.models import Scraper, ScraperVersion
from registry.services import version_route
from tests.clients import client_for
from tests.registry.factories import LINK_SPIDER, RAISING_SPIDER, make_job

pytestmark = pytest.mark.django_db


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


# --- who may -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/scrapers/"),
        ("post", "/api/scrapers/"),
        ("get", "/api/scrapers/link/"),
        ("get", "/api/scrapers/link/versions/"),
        ("post", "/api/scrapers/link/versions/"),
        ("post", "/api/scrapers/link/versions/1.0.0/deprecate/"),
        ("put", "/api/scrapers/link/traffic/"),
        ("get", "/api/scrapers/link/compare/"),
    ],
)
def test_only_admin_tokens_manage_scrapers(builtins, api, method, path):
    anonymous = getattr(APIClient(), method)(path, {}, format="json")
    requester = getattr(api, method)(path, {}, format="json")

    assert anonymous.status_code in (401, 403)
    assert requester.status_code == 403
    assert "admin token" in requester.json()["detail"]
    assert ScraperVersion.objects.get(scraper__name="link").deprecated_at is None


# --- scrapers ----------------------------------------------------------------------------------


def test_register_and_list_scrapers(ops, builtins):
    created = ops.post(
        "/api/scrapers/", {"name": "shop", "description": "The shop", "settings": {"DOWNLOAD_DELAY": 1}}, format="json"
    )
    listed = ops.get("/api/scrapers/").json()

    assert created.status_code == 201
    assert created.json() | {"created_at": None} == {
        "name": "shop",
        "description": "The shop",
        "settings": {"DOWNLOAD_DELAY": 1},
        "created_at": None,
        "traffic": {},
        "effective_share": {},
        "versions": [],
    }
    names = [s["name"] for s in listed["results"]]
    assert "shop" in names and {"link", "selectors"} <= set(names) and names == sorted(names)
    assert listed["results"][0]["versions"][0]["version"] == "1.0.0"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "shop"}, "name"),  # exists
        ({"name": "no spaces"}, "name"),
        ({}, "name"),
        ({"name": "ok", "colour": "red"}, "colour"),
    ],
)
def test_bad_scrapers_are_refused_naming_the_field(ops, shop, body, field):
    before = Scraper.objects.count()

    response = ops.post("/api/scrapers/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert Scraper.objects.count() == before


def test_unknown_scraper_is_404(ops):
    assert ops.get("/api/scrapers/nope/").status_code == 404
    assert ops.get("/api/scrapers/nope/versions/").status_code == 404
    assert add_version(ops, "1.0.0", scraper="nope", expect=404)


# --- versions ----------------------------------------------------------------------------------


def test_register_a_version(ops, shop):
    body = add_version(
        ops, "1.0.0", is_default=True, traffic_pct=90, min_priority=10, settings={"CONCURRENT_REQUESTS": 2}
    )

    assert {k: body[k] for k in ("scraper", "version", "variant", "spider", "is_default", "traffic_pct")} == {
        "scraper": "shop",
        "version": "1.0.0",
        "variant": "stable",
        "spider": LINK_SPIDER,
        "is_default": True,
        "traffic_pct": 90,
    }
    assert (body["min_priority"], body["settings"], body["state"]) == (10, {"CONCURRENT_REQUESTS": 2}, "active")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"version": "1.0"}, "version"),
        ({"variant": "nightly"}, "variant"),
        ({"spider": "nowhere.Spider"}, "spider"),
        ({"spider": "registry.semver.semver_key"}, "spider"),
        ({"traffic_pct": 120}, "traffic_pct"),
        ({"traffic_pct": 20}, "traffic_pct"),  # 90 + 20 > 100
        ({"min_priority": 0}, "min_priority"),
        ({"version": "1.0.0"}, "version"),  # exists
        ({"settings": "fast"}, "settings"),
        ({"flavour": "x"}, "flavour"),
    ],
)
def test_bad_versions_are_refused_naming_the_field_and_nothing_changes(ops, shop, fields, field):
    add_version(ops, "1.0.0", is_default=True, traffic_pct=90)
    before = list(ScraperVersion.objects.values())

    response = ops.post(
        "/api/scrapers/shop/versions/",
        {"version": "1.1.0", "variant": "canary", "spider": LINK_SPIDER, **fields},
        format="json",
    )

    assert response.status_code == 400, response.content
    assert field in response.json()
    assert list(ScraperVersion.objects.values()) == before


def test_versions_list_newest_first_by_semver(ops, shop):
    for version in ("1.9.0", "1.10.0", "1.2.0"):
        add_version(ops, version)

    listed = ops.get("/api/scrapers/shop/versions/").json()

    assert [v["version"] for v in listed["results"]] == ["1.10.0", "1.9.0", "1.2.0"]


def test_version_detail_takes_any_semver_in_the_path(ops, shop):
    add_version(ops, "2.0.0-rc.1+build.5")

    assert ops.get("/api/scrapers/shop/versions/2.0.0-rc.1+build.5/").json()["version"] == "2.0.0-rc.1+build.5"
    assert ops.get("/api/scrapers/shop/versions/9.9.9/").status_code == 404


def test_deprecate(ops, shop):
    add_version(ops, "1.0.0", is_default=True)
    add_version(ops, "1.1.0", variant="canary", traffic_pct=30)
    add_version(ops, "1.2.0", variant="beta")

    response = ops.post("/api/scrapers/shop/versions/1.1.0/deprecate/")
    again = ops.post("/api/scrapers/shop/versions/1.1.0/deprecate/")
    default = ops.post("/api/scrapers/shop/versions/1.0.0/deprecate/")

    assert response.status_code == 200
    assert (response.json()["state"], response.json()["traffic_pct"]) == ("deprecated", 0)
    assert again.status_code == 409
    assert default.status_code == 400 and "promote another version first" in default.json()["version"][0]
    scraper = Scraper.objects.get(name="shop")
    assert {version_route(scraper=scraper).version for _ in range(200)} == {"1.0.0"}


def test_promote(ops, shop):
    add_version(ops, "1.0.0", is_default=True, traffic_pct=90)
    add_version(ops, "1.1.0", variant="canary", traffic_pct=10)

    response = ops.post("/api/scrapers/shop/versions/1.1.0/promote/")

    assert response.status_code == 200
    assert (response.json()["variant"], response.json()["is_default"], response.json()["traffic_pct"]) == (
        "stable",
        True,
        100,
    )
    assert traffic() == {"1.0.0": 0, "1.1.0": 100}


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


def test_openapi_documents_the_registry(builtins):
    schema = APIClient().get("/api/schema/?format=json").json()

    assert "/api/scrapers/{name}/traffic/" in schema["paths"]
    assert "put" in schema["paths"]["/api/scrapers/{name}/traffic/"]
    assert "/api/scrapers/{scraper_name}/versions/{version}/deprecate/" in schema["paths"]


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
