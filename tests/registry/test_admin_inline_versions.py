"""The registry in the Django admin: a scraper's versions inline, held to the same rules as the API."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from registry.models import ScraperVersion
from tests.registry.admin_helpers import change_page, shop, traffic, version

pytestmark = pytest.mark.django_db
__all__ = ["shop"]  # a fixture


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
