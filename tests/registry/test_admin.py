"""The registry in the Django admin: versions inline, the same rules as the API, actions, and the comparison page."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse

from crawls.models import JobStatus
from registry.models import ScraperVersion
from registry.services import version_create, version_rollback_check
from tests.registry.factories import LINK_SPIDER, make_job, make_scraper

pytestmark = pytest.mark.django_db

VERSIONS_URL = "/admin/registry/scraperversion/"


@pytest.fixture
def shop():
    scraper = make_scraper("shop")
    version_create(scraper=scraper, version="1.0.0", spider=LINK_SPIDER, is_default=True, traffic_pct=90)
    version_create(scraper=scraper, version="1.1.0", spider=LINK_SPIDER, variant="canary", traffic_pct=10)
    return scraper


def version(v: str) -> ScraperVersion:
    return ScraperVersion.objects.get(scraper__name="shop", version=v)


def traffic() -> dict[str, int]:
    return {v.version: v.traffic_pct for v in ScraperVersion.objects.filter(scraper__name="shop")}


def form_data(response) -> dict:
    """The POST a browser would send back for the change page as rendered: main form plus every inline."""

    def put(data, prefix, form):
        for name in form.fields:
            value = form[name].value()
            key = f"{prefix}{name}"
            if isinstance(value, bool):
                if value:
                    data[key] = "on"
            elif isinstance(value, dict | list):
                data[key] = json.dumps(value)
            else:
                data[key] = "" if value is None else value

    data: dict = {}
    put(data, "", response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        put(data, f"{formset.prefix}-", formset.management_form)
        for index, form in enumerate(formset.forms):
            put(data, f"{formset.prefix}-{index}-", form)
    return data


def change_page(admin_client, scraper):
    return admin_client.get(reverse("admin:registry_scraper_change", args=[scraper.pk]))


def act(admin_client, action, *versions, **extra):
    data = {"action": action, "_selected_action": [v.pk for v in versions], "index": 0, "select_across": 0, **extra}
    return admin_client.post(VERSIONS_URL, data, follow=True)


def shown(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


# --- inline ------------------------------------------------------------------------------------


def test_scraper_page_shows_its_versions_inline_and_links_the_comparison(admin_client, shop):
    response = change_page(admin_client, shop)

    html = response.content.decode()
    assert response.status_code == 200
    assert set(versions_index(response)) == {"1.0.0", "1.1.0"}
    assert reverse("admin:registry_scraper_compare", args=[shop.pk]) in html


def versions_index(response) -> dict[str, int]:
    forms = response.context["inline_admin_formsets"][0].formset.forms
    return {form.instance.version: index for index, form in enumerate(forms)}


def test_inline_traffic_over_100_is_refused_and_nothing_changes(admin_client, shop):
    page = change_page(admin_client, shop)
    data = form_data(page)
    data[f"versions-{versions_index(page)['1.1.0']}-traffic_pct"] = 20

    response = admin_client.post(reverse("admin:registry_scraper_change", args=[shop.pk]), data)

    assert response.status_code == 200, "the form comes back with the error"
    assert "110%" in response.content.decode()
    assert traffic() == {"1.0.0": 90, "1.1.0": 10}


def test_inline_moving_traffic_between_versions_is_judged_as_a_whole(admin_client, shop):
    page = change_page(admin_client, shop)
    index = versions_index(page)
    data = form_data(page)
    data[f"versions-{index['1.0.0']}-traffic_pct"] = 10
    data[f"versions-{index['1.1.0']}-traffic_pct"] = 90

    response = admin_client.post(reverse("admin:registry_scraper_change", args=[shop.pk]), data)

    assert response.status_code == 302, response.content.decode()[:2000]
    assert traffic() == {"1.0.0": 10, "1.1.0": 90}


def test_inline_two_defaults_are_refused(admin_client, shop):
    page = change_page(admin_client, shop)
    data = form_data(page)
    data[f"versions-{versions_index(page)['1.1.0']}-is_default"] = "on"

    response = admin_client.post(reverse("admin:registry_scraper_change", args=[shop.pk]), data)

    assert response.status_code == 200
    assert "only one version of a scraper can be the default" in response.content.decode()
    assert version("1.1.0").is_default is False


def test_inline_bad_spider_and_version_are_refused(admin_client, shop):
    page = change_page(admin_client, shop)
    data = form_data(page)
    total = int(data["versions-TOTAL_FORMS"])
    data["versions-TOTAL_FORMS"] = total + 1
    data.update(
        {
            f"versions-{total}-version": "1.2",
            f"versions-{total}-variant": "beta",
            f"versions-{total}-spider": "no.such.Spider",
            f"versions-{total}-traffic_pct": 0,
            f"versions-{total}-min_priority": 1,
            f"versions-{total}-scraper": shop.pk,
        }
    )

    response = admin_client.post(reverse("admin:registry_scraper_change", args=[shop.pk]), data)

    html = response.content.decode()
    assert response.status_code == 200
    assert "not a semantic version" in html and "cannot import" in html
    assert ScraperVersion.objects.filter(scraper=shop).count() == 2


def test_version_change_form_refuses_traffic_over_100(admin_client, shop):
    canary = version("1.1.0")
    url = reverse("admin:registry_scraperversion_change", args=[canary.pk])
    data = form_data(admin_client.get(url))
    data["traffic_pct"] = 50

    response = admin_client.post(url, data)

    assert response.status_code == 200
    assert "140%" in response.content.decode()
    assert version("1.1.0").traffic_pct == 10


# --- actions -----------------------------------------------------------------------------------


def test_deprecate_action(admin_client, shop):
    response = act(admin_client, "deprecate", version("1.1.0"))

    assert "Deprecated shop 1.1.0" in shown(response)
    assert version("1.1.0").deprecated_at is not None
    assert traffic() == {"1.0.0": 90, "1.1.0": 0}


def test_deprecate_action_explains_a_refusal(admin_client, shop):
    response = act(admin_client, "deprecate", version("1.0.0"))

    assert "promote another version first" in shown(response)
    assert version("1.0.0").deprecated_at is None


def test_promote_action_sets_stable_default_and_100(admin_client, shop):
    response = act(admin_client, "promote_to_stable", version("1.1.0"))

    promoted = version("1.1.0")
    assert "now stable, default, 100%" in shown(response)
    assert (promoted.variant, promoted.is_default, promoted.traffic_pct) == ("stable", True, 100)
    assert traffic() == {"1.0.0": 0, "1.1.0": 100}


def test_set_traffic_action_asks_then_applies_the_split(admin_client, shop):
    canary = version("1.1.0")
    form = act(admin_client, "set_traffic", canary)
    stable_field, canary_field = f"pct_{version('1.0.0').pk}", f"pct_{canary.pk}"

    applied = act(admin_client, "set_traffic", canary, apply="1", **{stable_field: 75, canary_field: 25})

    assert form.templates[0].name == "admin/registry/scraperversion/set_traffic.html"
    assert set(form.context["form"].fields) == {stable_field, canary_field}
    assert "Traffic of shop: 1.1.0 25%, 1.0.0 75%" in shown(applied)
    assert traffic() == {"1.0.0": 75, "1.1.0": 25}


def test_set_traffic_action_refuses_over_100_and_changes_nothing(admin_client, shop):
    canary = version("1.1.0")
    fields = {f"pct_{version('1.0.0').pk}": 80, f"pct_{canary.pk}": 30}

    response = act(admin_client, "set_traffic", canary, apply="1", **fields)

    assert "110%" in response.content.decode()
    assert traffic() == {"1.0.0": 90, "1.1.0": 10}


def test_set_traffic_action_needs_versions_of_one_scraper(admin_client, shop, builtins):
    link = ScraperVersion.objects.get(scraper__name="link")

    response = act(admin_client, "set_traffic", version("1.1.0"), link)

    assert "one scraper" in shown(response)


def test_an_action_from_the_comparison_page_returns_there(admin_client, shop):
    back = reverse("admin:registry_scraper_compare", args=[shop.pk]) + "?window=7d"

    response = admin_client.post(
        VERSIONS_URL,
        {"action": "deprecate", "_selected_action": [version("1.1.0").pk], "index": 0, "next": back},
    )

    assert response.status_code == 302 and response.url == back


# --- rollback and comparison -------------------------------------------------------------------


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
