"""The registry in the Django admin: a rollback shown with its reason, and the comparison page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from crawls.models import JobStatus
from registry.services import version_rollback_check
from tests.registry.admin_helpers import VERSIONS_URL, change_page, shop, version
from tests.registry.factories import make_job

pytestmark = pytest.mark.django_db
__all__ = ["shop"]  # a fixture


def test_a_rollback_is_shown_with_its_reason(admin_client, shop, settings):
    settings.TRAWL_ROLLBACK_MIN_JOBS = 3
    canary = version("1.1.0")
    for _ in range(3):
        make_job(canary, status=JobStatus.FAILED)
    version_rollback_check(version_id=canary.pk)

    changelist = admin_client.get(VERSIONS_URL).content.decode()
    detail = admin_client.get(reverse("admin:registry_scraperversion_change", args=[canary.pk])).content.decode()
    inline = change_page(admin_client, shop).content.decode()

    reason = version("1.1.0").rollback_reason
    assert reason.startswith("failed 3 of 3 jobs (100%)")
    for html in (changelist, detail, inline):
        assert "rolled back" in html and reason in html


def cell(html: str, version: str, metric: str) -> str:
    match = re.search(rf'data-version="{re.escape(version)}" data-metric="{metric}">([^<]*)<', html)
    assert match, f"no {metric} cell for {version}"
    return match.group(1).strip()


def test_comparison_page_shows_each_version_side_by_side(admin_client, shop):
    stable, canary = version("1.0.0"), version("1.1.0")
    for seconds, items in ((1.0, 3), (2.0, 5), (4.0, 4)):
        make_job(stable, items=items, seconds=seconds)
    make_job(stable, status=JobStatus.CANCELLED)
    make_job(canary, status=JobStatus.FAILED, error_class="parse", seconds=3.0)
    make_job(canary, status=JobStatus.FAILED, error_class="parse", seconds=5.0)
    make_job(canary, status=JobStatus.DEAD, error_class="worker_lost", seconds=9.0)
    make_job(canary, items=2, seconds=1.0)
    make_job(canary, status=JobStatus.FAILED, ended_ago=timedelta(days=2))  # outside the 24h window

    response = admin_client.get(reverse("admin:registry_scraper_compare", args=[shop.pk]))
    html = response.content.decode()

    assert response.status_code == 200
    assert response.context["window"] == "24h"
    assert [(c, cell(html, "1.0.0", c)) for c in ("jobs", "succeeded", "failed", "cancelled")] == [
        ("jobs", "3"),
        ("succeeded", "3"),
        ("failed", "0"),
        ("cancelled", "1"),
    ]
    assert cell(html, "1.0.0", "success_rate") == "100.0%"
    assert cell(html, "1.0.0", "items_per_job") == "4.00"
    assert cell(html, "1.0.0", "median_duration") == "2.00 s"
    assert cell(html, "1.0.0", "error_classes") == "–"
    assert cell(html, "1.1.0", "jobs") == "4"
    assert cell(html, "1.1.0", "success_rate") == "25.0%"
    assert cell(html, "1.1.0", "items_per_job") == "0.50"
    assert cell(html, "1.1.0", "median_duration") == "4.00 s"
    assert cell(html, "1.1.0", "error_classes") == "parse ×2, worker_lost ×1"
    assert cell(html, "1.1.0", "traffic_pct") == "10%"


def test_comparison_window_is_chosen_by_the_operator(admin_client, shop):
    canary = version("1.1.0")
    make_job(canary, status=JobStatus.FAILED, ended_ago=timedelta(days=2))
    make_job(canary, ended_ago=timedelta(hours=2))
    url = reverse("admin:registry_scraper_compare", args=[shop.pk])

    last_hour = admin_client.get(url, {"window": "1h"}).content.decode()
    week = admin_client.get(url, {"window": "7d"}).content.decode()
    everything = admin_client.get(url, {"window": "all"}).content.decode()
    nonsense = admin_client.get(url, {"window": "soon"})

    assert cell(last_hour, "1.1.0", "jobs") == "0" and cell(last_hour, "1.1.0", "success_rate") == "–"
    assert cell(week, "1.1.0", "jobs") == "2" and cell(week, "1.1.0", "success_rate") == "50.0%"
    assert cell(everything, "1.1.0", "jobs") == "2"
    assert nonsense.status_code == 200 and nonsense.context["window"] == "24h"


def test_comparison_page_needs_staff(client, shop):
    response = client.get(reverse("admin:registry_scraper_compare", args=[shop.pk]))

    assert response.status_code == 302 and "/admin/login/" in response.url
