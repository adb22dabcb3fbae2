"""Adaptive politeness: where its verdict shows (the throttle API, stats and metrics, the admin)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from project.redis import get_redis
from tests.clients import client_for
from tests.throttling.adaptive_helpers import clean_keys  # noqa: F401 (an autouse fixture)
from tests.throttling.buckets_helpers import publish  # noqa: F401 (a fixture)
from throttling.adaptive import AdaptiveState
from throttling.services import throttle_buckets, throttle_create, throttle_update


@pytest.mark.django_db
def test_the_throttle_api_shows_the_effective_rate_and_why(publish):  # noqa: F811
    throttle = publish(throttle_create, domain="slow.example", rate=4, burst=2, scale=0.5)
    state = AdaptiveState(factor=0.25, baseline=0.05, reason="slowed down: 30% errors in the last window")
    get_redis().set(throttle_buckets().state_key("slow.example"), state.as_redis())
    api = client_for("ops", admin=True)

    detail = api.get("/api/throttles/slow.example/").json()
    listed = api.get("/api/throttles/").json()

    assert detail["adaptive"] is True
    assert detail["effective_rate"] == pytest.approx(0.5)  # 4 × 0.5 × 0.25
    assert "30% errors" in detail["adaptive_reason"]
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["effective_rate"] for row in rows if row["domain"] == "slow.example"] == [pytest.approx(0.5)]

    publish(throttle_update, throttle=throttle, adaptive=False)
    detail = api.get("/api/throttles/slow.example/").json()
    assert detail["effective_rate"] == pytest.approx(2.0)
    assert "adaptive off" in detail["adaptive_reason"]


@pytest.mark.django_db
def test_stats_and_metrics_show_slowed_domains(publish):  # noqa: F811
    publish(throttle_create, domain="slow.example", rate=4, burst=2)
    state = AdaptiveState(factor=0.5, baseline=0.05, reason="slowed down: latency 0.30s above 2× baseline 0.05s")
    get_redis().set(throttle_buckets().state_key("slow.example"), state.as_redis())
    api = client_for("ops", admin=True)

    stats = api.get("/api/stats/").json()
    metrics = api.get("/metrics").content.decode()

    [row] = [row for row in stats["throttle"]["adaptive"] if row["domain"] == "slow.example"]
    assert row["effective_rate"] == pytest.approx(2.0) and row["configured_rate"] == 4 and row["cause"] == "latency"
    assert 'trawl_throttle_effective_rate{cause="latency",domain="slow.example"} 2.0' in metrics


@pytest.mark.django_db
def test_the_admin_lists_the_effective_rate_and_why(publish, admin_client):  # noqa: F811
    throttle = publish(throttle_create, domain="slow.example", rate=4, burst=2)
    state = AdaptiveState(factor=0.25, baseline=0.05, reason="slowed down: 30% errors in the last window")
    get_redis().set(throttle_buckets().state_key("slow.example"), state.as_redis())

    listing = admin_client.get(reverse("admin:throttling_domainthrottle_changelist")).content.decode()
    detail = admin_client.get(reverse("admin:throttling_domainthrottle_change", args=[throttle.pk])).content.decode()

    assert "slowed down: 30% errors in the last window" in listing and ">1.0<" in listing
    assert 'name="adaptive"' in detail and "30% errors" in detail
