"""The registry in the Django admin: the versions' actions (deprecate, promote, set traffic)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.models import ScraperVersion
from tests.registry.admin_helpers import VERSIONS_URL, shop, traffic, version

pytestmark = pytest.mark.django_db
__all__ = ["shop"]  # a fixture


def act(admin_client, action, *versions, **extra):
    data = {"action": action, "_selected_action": [v.pk for v in versions], "index": 0, "select_across": 0, **extra}
    return admin_client.post(VERSIONS_URL, data, follow=True)


def shown(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


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
