"""Registering, deprecating, promoting and splitting traffic: the rules every write path (admin, API, CLI) obeys."""

from __future__ import annotations

import pytest
from django.utils import timezone

from project.errors import TrawlError
from registry.errors import RegistryError
from registry.models import ScraperVersion
from registry.services import (
    scraper_create,
    traffic_set,
    version_create,
    version_deprecate,
    version_promote,
    version_route,
)
from tests.registry.factories import LINK_SPIDER, make_scraper

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop():
    return make_scraper("shop")


def register(scraper, version="1.0.0", **fields):
    return version_create(scraper=scraper, version=version, spider=fields.pop("spider", LINK_SPIDER), **fields)


def split(scraper) -> dict[str, int]:
    return {v.version: v.traffic_pct for v in ScraperVersion.objects.filter(scraper=scraper)}


def test_a_valid_version_is_registered(shop):
    version = register(shop, "1.2.0", variant="canary", traffic_pct=10, min_priority=20, settings={"X": 1})

    stored = ScraperVersion.objects.get(pk=version.pk)
    assert (stored.variant, stored.traffic_pct, stored.min_priority, stored.settings) == ("canary", 10, 20, {"X": 1})
    assert stored.rollout_started_at is not None, "a version registered with traffic starts a rollout"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"version": "1.2"}, "version"),
        ({"version": "v1.2.0"}, "version"),
        ({"variant": "nightly"}, "variant"),
        ({"spider": "no.such.module.Spider"}, "spider"),
        ({"spider": "registry.semver.semver_key"}, "spider"),  # importable, but not a Spider subclass
        ({"spider": "scrapy.Request"}, "spider"),
        ({"traffic_pct": 101}, "traffic_pct"),
        ({"traffic_pct": -1}, "traffic_pct"),
        ({"min_priority": 0}, "min_priority"),
        ({"min_priority": 101}, "min_priority"),
    ],
)
def test_invalid_versions_are_refused_naming_the_field(shop, fields, field):
    with pytest.raises(RegistryError) as refused:
        register(shop, **{"version": "1.0.0", **fields})

    assert field in refused.value.errors
    assert not ScraperVersion.objects.filter(scraper=shop).exists()


def test_every_bad_field_is_named_at_once(shop):
    with pytest.raises(RegistryError) as refused:
        register(shop, "latest", variant="nightly", spider="nope.Nope")

    assert set(refused.value.errors) == {"version", "variant", "spider"}
    assert refused.value.as_dict() == refused.value.errors  # the 400 body


def test_a_version_is_unique_per_scraper(shop):
    register(shop, "1.0.0")
    other = make_scraper("other")

    with pytest.raises(RegistryError) as refused:
        register(shop, "1.0.0")
    register(other, "1.0.0")  # the same version string on another scraper is fine

    assert "already has a version '1.0.0'" in refused.value.errors["version"][0]


def test_versions_of_equal_precedence_are_refused(shop):
    register(shop, "1.0.0")

    with pytest.raises(RegistryError) as refused:
        register(shop, "1.0.0+build.7")

    assert "same precedence" in refused.value.errors["version"][0]


def test_active_traffic_may_not_exceed_100(shop):
    register(shop, "1.0.0", traffic_pct=90, is_default=True)

    with pytest.raises(RegistryError) as refused:
        register(shop, "1.1.0", variant="canary", traffic_pct=20)

    assert "110%" in refused.value.errors["traffic_pct"][0]
    assert split(shop) == {"1.0.0": 90}


def test_deprecated_versions_do_not_count_towards_the_100(shop):
    old = register(shop, "0.9.0", traffic_pct=60)
    register(shop, "1.0.0", is_default=True)
    version_deprecate(version=old)

    register(shop, "1.1.0", variant="canary", traffic_pct=100)

    assert split(shop) == {"0.9.0": 0, "1.0.0": 0, "1.1.0": 100}


def test_a_new_default_takes_over_from_the_old_one(shop):
    register(shop, "1.0.0", is_default=True)
    register(shop, "1.1.0", is_default=True)

    assert list(ScraperVersion.objects.filter(scraper=shop, is_default=True).values_list("version", flat=True)) == [
        "1.1.0"
    ]


def test_scraper_names_are_slugs_and_unique():
    scraper_create(name="shop")

    with pytest.raises(RegistryError) as duplicate:
        scraper_create(name="shop")
    with pytest.raises(RegistryError) as bad:
        scraper_create(name="no spaces please")

    assert "name" in duplicate.value.errors and "name" in bad.value.errors


# --- traffic ---------------------------------------------------------------------------------------


def test_traffic_set_replaces_the_whole_split(shop):
    register(shop, "1.0.0", is_default=True, traffic_pct=90)
    register(shop, "1.1.0", variant="canary", traffic_pct=10)
    register(shop, "1.2.0", variant="beta")

    result = traffic_set(scraper=shop, allocation={"1.1.0": 50, "1.2.0": 25})

    assert result == {"1.2.0": 25, "1.1.0": 50, "1.0.0": 0}
    assert split(shop) == {"1.0.0": 0, "1.1.0": 50, "1.2.0": 25}


@pytest.mark.parametrize(
    ("allocation", "field"),
    [
        ({"1.0.0": 80, "1.1.0": 30}, "traffic_pct"),
        ({"1.0.0": 50, "9.9.9": 10}, "9.9.9"),
        ({"1.0.0": 50, "1.1.0": 101}, "1.1.0"),
        ({"1.0.0": 50, "1.1.0": -5}, "1.1.0"),
        ({"1.0.0": 50, "1.1.0": "10"}, "1.1.0"),
        ({"1.0.0": 50, "1.1.0": 10.5}, "1.1.0"),
        ({"1.0.0": True}, "1.0.0"),
        ({"0.9.0": 10}, "0.9.0"),  # deprecated
        ({}, "traffic"),
    ],
)
def test_an_invalid_allocation_changes_nothing(shop, allocation, field):
    old = register(shop, "0.9.0")
    register(shop, "1.0.0", is_default=True, traffic_pct=90)
    register(shop, "1.1.0", variant="canary", traffic_pct=10)
    version_deprecate(version=old)
    before = list(ScraperVersion.objects.filter(scraper=shop).order_by("pk").values())

    with pytest.raises(RegistryError) as refused:
        traffic_set(scraper=shop, allocation=allocation)

    assert field in refused.value.errors
    assert list(ScraperVersion.objects.filter(scraper=shop).order_by("pk").values()) == before


def test_raising_traffic_from_zero_starts_a_new_rollout_and_ends_a_rollback(shop):
    register(shop, "1.0.0", is_default=True)
    canary = register(shop, "1.1.0", variant="canary")
    ScraperVersion.objects.filter(pk=canary.pk).update(rolled_back_at=timezone.now(), rollback_reason="too many fails")

    traffic_set(scraper=shop, allocation={"1.1.0": 5})

    canary.refresh_from_db()
    assert canary.rollout_started_at is not None
    assert (canary.rolled_back_at, canary.rollback_reason, canary.state) == (None, "", "active")


# --- deprecate and promote -------------------------------------------------------------------------


def test_deprecated_version_takes_no_traffic_and_never_routes(shop):
    register(shop, "1.0.0", is_default=True, traffic_pct=50)
    canary = register(shop, "1.1.0", variant="canary", traffic_pct=50)

    version_deprecate(version=canary)

    canary.refresh_from_db()
    assert canary.deprecated_at is not None and canary.traffic_pct == 0
    assert {version_route(scraper=shop).version for _ in range(300)} == {"1.0.0"}
    with pytest.raises(TrawlError, match=r"no active version '1\.1\.0'"):
        version_route(scraper=shop, version="1.1.0")
    with pytest.raises(TrawlError, match="no active 'canary' version"):
        version_route(scraper=shop, variant="canary")


def test_deprecating_twice_is_a_conflict(shop):
    register(shop, "1.0.0", is_default=True)
    old = register(shop, "0.9.0")
    version_deprecate(version=old)

    with pytest.raises(TrawlError) as again:
        version_deprecate(version=old)

    assert again.value.status_code == 409


def test_the_default_cannot_be_deprecated_while_others_are_active(shop):
    default = register(shop, "1.0.0", is_default=True)
    register(shop, "1.1.0", variant="canary")

    with pytest.raises(TrawlError, match="promote another version first"):
        version_deprecate(version=default)

    assert ScraperVersion.objects.get(pk=default.pk).deprecated_at is None


def test_the_last_version_can_be_retired(shop):
    only = register(shop, "1.0.0", is_default=True, traffic_pct=100)

    version_deprecate(version=only)

    with pytest.raises(TrawlError, match="no version to route to"):
        version_route(scraper=shop)


def test_promote_makes_the_stable_default_with_all_the_traffic(shop):
    register(shop, "1.0.0", is_default=True, traffic_pct=80)
    register(shop, "1.1.0", variant="beta", traffic_pct=10)
    canary = register(shop, "1.2.0", variant="canary", traffic_pct=10)

    version_promote(version=canary)

    promoted = ScraperVersion.objects.get(pk=canary.pk)
    assert (promoted.variant, promoted.is_default, promoted.traffic_pct) == ("stable", True, 100)
    assert split(shop) == {"1.0.0": 0, "1.1.0": 0, "1.2.0": 100}
    assert ScraperVersion.objects.filter(scraper=shop, is_default=True).count() == 1
    assert {version_route(scraper=shop).version for _ in range(200)} == {"1.2.0"}


def test_a_deprecated_version_cannot_be_promoted(shop):
    register(shop, "1.0.0", is_default=True)
    old = register(shop, "0.9.0")
    version_deprecate(version=old)

    with pytest.raises(TrawlError, match="deprecated"):
        version_promote(version=old)
