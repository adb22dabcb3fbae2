"""`/api/scrapers/`: registering scrapers and versions, deprecating and promoting (admins only)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from registry.models import Scraper, ScraperVersion
from registry.services import version_route
from tests.registry.factories import LINK_SPIDER
from tests.registry.scrapers_api_helpers import add_version, ops, shop, traffic

pytestmark = pytest.mark.django_db
__all__ = ["ops", "shop"]  # fixtures


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


def test_openapi_documents_the_registry(builtins):
    schema = APIClient().get("/api/schema/?format=json").json()

    assert "/api/scrapers/{name}/traffic/" in schema["paths"]
    assert "put" in schema["paths"]["/api/scrapers/{name}/traffic/"]
    assert "/api/scrapers/{scraper_name}/versions/{version}/deprecate/" in schema["paths"]
