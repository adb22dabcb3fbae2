"""Which scraper version runs a job: exact, variant, weighted A/B split, default."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from django.utils import timezone

from project.errors import TrawlError
from registry.models import Package, PackageStatus, Scraper, ScraperVersion
from registry.services import VersionBuilding, version_route

pytestmark = pytest.mark.django_db

SPIDER = "runtime.spiders.link.LinkSpider"


@pytest.fixture
def scraper(db):
    return Scraper.objects.create(name="demo_shop")


@pytest.fixture
def add(scraper):
    def make(version, **fields):
        return ScraperVersion.objects.create(scraper=scraper, version=version, spider=SPIDER, **fields)

    return make


def shares(scraper, draws: int, *, seed: int = 7, **kwargs) -> dict[str, float]:
    rng = random.Random(seed)
    picks = Counter(version_route(scraper=scraper, rng=rng, **kwargs).version for _ in range(draws))
    return {version: 100 * count / draws for version, count in picks.items()}


def test_exact_version_wins_over_default_and_traffic(scraper, add):
    add("1.0.0", is_default=True, traffic_pct=100)
    add("0.9.0")

    assert version_route(scraper=scraper, version="0.9.0").version == "0.9.0"


def test_exact_version_that_is_deprecated_is_an_error(scraper, add):
    add("1.0.0", is_default=True)
    add("0.9.0", deprecated_at=timezone.now())

    with pytest.raises(TrawlError) as error:
        version_route(scraper=scraper, version="0.9.0")

    assert error.value.field == "version"
    assert "0.9.0" in error.value.message


def test_variant_picks_its_latest_version_by_semver(scraper, add):
    add("1.10.0", variant="canary")
    add("1.9.0", variant="canary")
    add("2.0.0", variant="stable", is_default=True)

    assert version_route(scraper=scraper, variant="canary").version == "1.10.0"


def test_variant_latest_skips_deprecated(scraper, add):
    add("1.0.0", variant="beta")
    add("1.1.0", variant="beta", deprecated_at=timezone.now())

    assert version_route(scraper=scraper, variant="beta").version == "1.0.0"


def test_variant_without_active_version_is_an_error(scraper, add):
    add("1.0.0", is_default=True)
    add("1.1.0", variant="canary", deprecated_at=timezone.now())

    with pytest.raises(TrawlError) as error:
        version_route(scraper=scraper, variant="canary")

    assert error.value.field == "variant"


def test_deprecated_version_is_never_picked(scraper, add):
    add("2.0.0", is_default=True, traffic_pct=100, deprecated_at=timezone.now())
    add("1.0.0", is_default=True)

    assert set(shares(scraper, 500)) == {"1.0.0"}


# Committed rows, so the draws also go through the per-process cache as a worker's would.
@pytest.mark.django_db(transaction=True)
def test_ninety_ten_split_holds_over_ten_thousand_draws(scraper, add):
    add("1.0.0", variant="stable", traffic_pct=90, is_default=True)
    add("1.1.0", variant="canary", traffic_pct=10)

    split = shares(scraper, 10_000)

    assert split["1.0.0"] == pytest.approx(90, abs=2)
    assert split["1.1.0"] == pytest.approx(10, abs=2)


# Committed rows, so the draws also go through the per-process cache as a worker's would.
@pytest.mark.django_db(transaction=True)
def test_traffic_below_100_leaves_the_rest_to_the_default(scraper, add):
    add("1.0.0", is_default=True)
    add("1.1.0", variant="canary", traffic_pct=20)

    split = shares(scraper, 5_000)

    assert split["1.1.0"] == pytest.approx(20, abs=2)
    assert split["1.0.0"] == pytest.approx(80, abs=2)


def test_same_seed_gives_the_same_routing(scraper, add):
    add("1.0.0", is_default=True, traffic_pct=50)
    add("1.1.0", traffic_pct=50)

    first = [version_route(scraper=scraper, rng=random.Random(3)).version for _ in range(3)]
    second = [version_route(scraper=scraper, rng=random.Random(3)).version for _ in range(3)]

    assert first == second


def test_min_priority_keeps_low_priority_jobs_off_a_version(scraper, add):
    add("1.0.0", is_default=True)
    add("1.1.0", variant="canary", traffic_pct=50, min_priority=80)

    low = shares(scraper, 1_000, priority=50)
    urgent = shares(scraper, 1_000, priority=80)

    assert set(low) == {"1.0.0"}
    assert urgent["1.1.0"] == pytest.approx(50, abs=5)


def test_default_when_no_version_has_traffic(scraper, add):
    add("2.0.0")
    add("1.0.0", is_default=True)

    assert version_route(scraper=scraper).version == "1.0.0"


def test_nothing_to_route_to_is_a_clear_error(scraper, add):
    add("1.0.0")

    with pytest.raises(TrawlError) as error:
        version_route(scraper=scraper)

    assert error.value.field == "scraper"
    assert "no version to route to" in error.value.message


def test_scraper_without_versions_is_a_clear_error(scraper):
    with pytest.raises(TrawlError, match="no version to route to"):
        version_route(scraper=scraper)


def test_routing_ignores_other_scrapers_versions(scraper, add):
    other = Scraper.objects.create(name="other")
    ScraperVersion.objects.create(scraper=other, version="9.0.0", spider=SPIDER, is_default=True, traffic_pct=100)
    add("1.0.0", is_default=True)

    assert set(shares(scraper, 200)) == {"1.0.0"}


# Committed rows, so the draws also go through the per-process cache as a worker's would.
@pytest.mark.django_db(transaction=True)
def test_without_a_default_the_versions_with_traffic_share_everything_by_weight(scraper, add):
    add("1.0.0", traffic_pct=30)
    add("1.1.0", variant="canary", traffic_pct=10)

    split = shares(scraper, 10_000)

    assert split["1.0.0"] == pytest.approx(75, abs=2)
    assert split["1.1.0"] == pytest.approx(25, abs=2)


def test_min_priority_without_a_default_is_a_clear_error_for_low_priority_jobs(scraper, add):
    add("1.0.0", traffic_pct=100, min_priority=90)

    with pytest.raises(TrawlError, match=r"no version to route to.*priority 10") as error:
        version_route(scraper=scraper, priority=10)

    assert version_route(scraper=scraper, priority=95).version == "1.0.0"
    assert error.value.field == "scraper"


def test_min_priority_does_not_apply_to_pins(scraper, add):
    add("1.0.0", is_default=True)
    add("1.1.0", variant="canary", traffic_pct=10, min_priority=90)

    assert version_route(scraper=scraper, variant="canary", priority=1).version == "1.1.0"
    assert version_route(scraper=scraper, version="1.1.0", priority=1).version == "1.1.0"


def test_latest_of_a_variant_is_semver_latest_not_newest_row(scraper, add):
    add("1.10.0", variant="beta")
    add("1.9.0", variant="beta")  # registered later, older version
    add("1.10.0-rc.1", variant="beta")

    assert version_route(scraper=scraper, variant="beta").version == "1.10.0"


def test_a_job_with_nothing_to_route_to_fails_cleanly_with_routing(scraper, add):
    from crawls.models import CrawlJob
    from crawls.services.execution import job_execute

    add("1.0.0")  # no default, no traffic
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper)

    result = job_execute(job_id=str(job.pk), attempt=1, worker="test")

    job.refresh_from_db()
    assert (result["status"], result["error_class"]) == ("failed", "routing")
    assert (job.status, job.error_class, job.version) == ("failed", "routing", None)
    assert "no version to route to" in job.error_message
    assert job.finished_at is not None


def test_a_job_records_the_version_it_ran_with(scraper, add, monkeypatch):
    from crawls.models import CrawlJob
    from crawls.services import execution

    add("1.0.0", is_default=True, traffic_pct=0)
    chosen = add("1.1.0", variant="canary", traffic_pct=100)
    job = CrawlJob.objects.create(url="http://shop.test/", scraper=scraper)
    # Stop right after routing: this test is about which version the job records, not about crawling.
    monkeypatch.setattr(execution, "scrapy_settings_for", lambda **kwargs: (_ for _ in ()).throw(RuntimeError("stop")))

    with pytest.raises(RuntimeError, match="stop"):
        execution.job_execute(job_id=str(job.pk), attempt=1, worker="test")

    assert CrawlJob.objects.get(pk=job.pk).version == chosen


def test_nothing_to_route_to_names_the_packaged_versions_that_cannot_run_and_why(scraper, add):
    def package(n: int) -> Package:
        sha = f"{n}" * 64
        return Package.objects.create(
            sha256=sha, path=f"{sha}/p-{n}.whl", filename=f"p-{n}.whl", name="p", dist_version=f"{n}", size=1
        )

    log = "the environment of p-1.whl does not build here: its wheel is not in the package storage\n\npip output"
    add("1.0.0", is_default=True, package=package(1), package_status=PackageStatus.FAILED, package_log=log)
    add("2.0.0", variant="canary", traffic_pct=10, package=package(2), package_status=PackageStatus.BUILDING)

    with pytest.raises(TrawlError) as unpinned:
        version_route(scraper=scraper)
    with pytest.raises(TrawlError) as by_variant:
        version_route(scraper=scraper, variant="canary")

    assert unpinned.value.message == (
        "scraper 'demo_shop' has no version to route to: no active default version and no active version with "
        "traffic for priority 50; the package of 'demo_shop' 2.0.0 is still building; the package of 'demo_shop' "
        "1.0.0 failed to build: the environment of p-1.whl does not build here: its wheel is not in the package "
        "storage"
    )
    assert by_variant.value.message.startswith("scraper 'demo_shop' has no active 'canary' version; the package of")


def test_a_version_still_building_that_could_run_the_job_is_told_apart_from_one_that_never_will(scraper, add):
    def package(n: int) -> Package:
        sha = f"{n}" * 64
        return Package.objects.create(
            sha256=sha, path=f"{sha}/p-{n}.whl", filename=f"p-{n}.whl", name="p", dist_version=f"{n}", size=1
        )

    add("1.0.0", is_default=True, package=package(1), package_status=PackageStatus.FAILED, package_log="no wheel")
    add("2.0.0", variant="canary", package=package(2), package_status=PackageStatus.BUILDING)

    with pytest.raises(VersionBuilding):  # a job may wait: the build may make it the one that runs
        version_route(scraper=scraper)
    with pytest.raises(VersionBuilding):
        version_route(scraper=scraper, version="2.0.0")
    with pytest.raises(VersionBuilding):
        version_route(scraper=scraper, variant="canary")
    for never in ({"version": "1.0.0"}, {"variant": "stable"}, {"version": "3.0.0"}):  # failed, none, no such
        with pytest.raises(TrawlError) as refused:
            version_route(scraper=scraper, **never)
        assert not isinstance(refused.value, VersionBuilding), never
