"""Adaptive politeness: where its verdict shows (the throttle API, stats and metrics, the admin)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from project.redis import get_redis
from tests.clients import client_for
from tests.throttling.adaptive_helpers import clean_keys  # noqa: F401 (an autouse fixture)
from tests.throttling.buckets_helpers import publish  # noqa: F401 (a fixture)
from throttling.adaptive import AdaptiveState
from throttling.controller import adaptive_state_store
from throttling.robots import RobotsCap
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
    adaptive_state_store(get_redis(), buckets=throttle_buckets(), name="slow.example", state=state)
    api = client_for("ops", admin=True)

    stats = api.get("/api/stats/").json()
    metrics = api.get("/metrics").content.decode()

    [row] = [row for row in stats["throttle"]["adaptive"] if row["domain"] == "slow.example"]
    assert row["effective_rate"] == pytest.approx(2.0) and row["configured_rate"] == 4 and row["cause"] == "latency"
    assert row["factor"] == 0.5 and "latency" in row["reason"] and stats["throttle"]["slowed"] == 1
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


@pytest.mark.django_db
def test_the_admin_and_the_api_show_what_robots_txt_asks_for_and_whether_it_applies(publish, admin_client):  # noqa: F811
    throttle = publish(throttle_create, domain="polite.example", rate=20, burst=10)
    publish(throttle_create, domain="ignoring.example", rate=20, burst=10, obey_crawl_delay=False)
    for domain in ("polite.example", "ignoring.example"):
        get_redis().set(throttle_buckets().robots_key(domain), RobotsCap(rate=0.5, delay=2.0).as_redis())

    listing = admin_client.get(reverse("admin:throttling_domainthrottle_changelist")).content.decode()
    detail = admin_client.get(reverse("admin:throttling_domainthrottle_change", args=[throttle.pk])).content.decode()
    rows = {row["domain"]: row for row in client_for("ops", admin=True).get("/api/throttles/").json()["results"]}

    assert "2s between requests (applies)" in listing and "ignored by this rule" in listing
    assert 'name="obey_crawl_delay"' in detail and 'name="max_pages_per_job"' in detail
    assert rows["polite.example"]["robots_delay"] == 2.0 and rows["ignoring.example"]["obey_crawl_delay"] is False


@pytest.mark.django_db
def test_metrics_list_the_most_slowed_domains_and_count_the_rest(settings):
    """Thousands of slowed domains: /metrics (and /api/stats/) list the TRAWL_METRICS_MAX_DOMAINS most slowed and
    count all; a domain back at its rate leaves the index, one whose state expired is dropped when it comes up."""
    settings.TRAWL_METRICS_MAX_DOMAINS = 5
    client, buckets = get_redis(), throttle_buckets()
    for n in range(2000):
        state = AdaptiveState(factor=0.1 + n / 4000, reason="slowed down: 30% errors in the last window")
        adaptive_state_store(client, buckets=buckets, name=f"site{n}.example", state=state)
    adaptive_state_store(client, buckets=buckets, name="site1.example", state=AdaptiveState(factor=1.0))
    client.delete(buckets.state_key("site0.example"))  # expired
    api = client_for("ops", admin=True)

    metrics = api.get("/metrics").content.decode()
    stats = api.get("/api/stats/").json()["throttle"]

    listed = sorted(set(re.findall(r'trawl_throttle_effective_rate\{cause="errors",domain="([^"]+)"\}', metrics)))
    assert listed == [f"site{n}.example" for n in range(2, 6)]  # site0 expired (dropped), site1 recovered
    assert "trawl_throttle_slowed_domains 1998.0" in metrics
    assert client.zcard(buckets.adaptive_index_key()) == 1998
    assert [row["domain"] for row in stats["adaptive"]] == [f"site{n}.example" for n in range(2, 7)]
    assert stats["slowed"] == 1998
