"""Two versions of a scraper through a real worker: routing by traffic, automatic rollback, the admin comparison."""

from __future__ import annotations

import re
import statistics
import time

import pytest
from django.urls import reverse

from crawls.models import CrawlJob
from registry.models import Scraper, ScraperVersion
from tests.clients import client_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

STABLE_SPIDER = "runtime.spiders.link.LinkSpider"  # one item per page
CANARY_SPIDER = "tests.fixtures.spiders.RaisingSpider"  # raises in parse: every job fails with spider_error


@pytest.fixture
def ops():
    return client_for("ops", admin=True)


def ok(response, status=200):
    assert response.status_code == status, response.content
    return response.json()


def run_jobs(api, job_waiter, site, pages):
    ids = [
        ok(api.post("/api/jobs/", {"url": f"{site.url}/product-{n}.html", "scraper": "ab_shop"}), 201)["id"]
        for n in pages
    ]
    return [job_waiter(job_id) for job_id in ids]


def wait_for(predicate, *, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def cell(html: str, version: str, metric: str) -> str:
    match = re.search(rf'data-version="{re.escape(version)}" data-metric="{metric}">([^<]*)<', html)
    assert match, f"no {metric} cell for {version}"
    return match.group(1).strip()


def test_rollout_rollback_and_comparison_through_a_real_worker(ops, api, site, job_waiter, admin_client):
    # Registered through the API; the scraper asks for a quick verdict: 3 jobs, 50 points worse than stable.
    ok(ops.post("/api/scrapers/", {"name": "ab_shop", "settings": {"TRAWL_ROLLBACK_MIN_JOBS": 3}}, format="json"), 201)
    versions = "/api/scrapers/ab_shop/versions/"
    stable = {"version": "1.0.0", "variant": "stable", "spider": STABLE_SPIDER, "is_default": True, "traffic_pct": 100}
    ok(ops.post(versions, stable, format="json"), 201)
    ok(ops.post(versions, {"version": "1.1.0", "variant": "canary", "spider": CANARY_SPIDER}, format="json"), 201)

    # All traffic on stable: the worker routes (and caches) 1.0.0.
    before = run_jobs(api, job_waiter, site, [1, 2])
    # The operator moves all traffic to the canary in this process; the worker's next routes follow it.
    ok(ops.put("/api/scrapers/ab_shop/traffic/", {"1.1.0": 100}, format="json"))
    canary_jobs = run_jobs(api, job_waiter, site, [3, 4, 5])
    # The worker rolled the canary back after its third failure (TRAWL_ROLLBACK_MIN_JOBS=3 for this scraper).
    assert wait_for(lambda: ScraperVersion.objects.get(scraper__name="ab_shop", version="1.1.0").traffic_pct == 0)
    after = run_jobs(api, job_waiter, site, [6, 7])

    stable_jobs = before + after
    assert [(j.version.version, j.status) for j in stable_jobs] == [("1.0.0", "succeeded")] * 4
    assert [(j.version.version, j.status, j.error_class) for j in canary_jobs] == [
        ("1.1.0", "failed", "spider_error")
    ] * 3
    canary = ok(ops.get(f"{versions}1.1.0/"))
    assert (canary["traffic_pct"], canary["state"]) == (0, "rolled back")
    assert canary["rollback_reason"].startswith("failed 3 of 3 jobs (100%) vs 0% for stable 1.0.0")
    assert ok(ops.get("/api/scrapers/ab_shop/traffic/")) == {"1.1.0": 0, "1.0.0": 0}, "the rest goes to the default"

    # The admin's comparison, read by a logged-in staff user, matches what the jobs did.
    scraper = Scraper.objects.get(name="ab_shop")
    page = admin_client.get(reverse("admin:registry_scraper_compare", args=[scraper.pk]), {"window": "1h"})
    html = page.content.decode()
    assert page.status_code == 200
    for version, jobs in (("1.0.0", stable_jobs), ("1.1.0", canary_jobs)):
        jobs = [CrawlJob.objects.get(pk=j.pk) for j in jobs]
        succeeded = sum(j.status == "succeeded" for j in jobs)
        items = sum(j.stats["items"] for j in jobs)
        assert cell(html, version, "jobs") == str(len(jobs))
        assert cell(html, version, "succeeded") == str(succeeded)
        assert cell(html, version, "failed") == str(len(jobs) - succeeded)
        assert cell(html, version, "success_rate") == f"{succeeded / len(jobs):.1%}"
        assert cell(html, version, "items_per_job") == f"{items / len(jobs):.2f}"
        assert cell(html, version, "median_duration") == f"{statistics.median(j.duration for j in jobs):.2f} s"
    assert cell(html, "1.0.0", "items_per_job") == "1.00"
    assert cell(html, "1.0.0", "error_classes") == "–"
    assert cell(html, "1.1.0", "error_classes") == "spider_error ×3"
    assert cell(html, "1.1.0", "state") == "rolled back"
    assert cell(html, "1.1.0", "rollback_reason") == canary["rollback_reason"]
    # The API's comparison agrees with the page.
    rows = {row["version"]: row for row in ok(ops.get("/api/scrapers/ab_shop/compare/?window=1h"))}
    assert (rows["1.0.0"]["jobs"], rows["1.0.0"]["success_rate"]) == (4, 1.0)
    assert (rows["1.1.0"]["jobs"], rows["1.1.0"]["success_rate"], rows["1.1.0"]["error_classes"]) == (
        3,
        0.0,
        {"spider_error": 3},
    )
