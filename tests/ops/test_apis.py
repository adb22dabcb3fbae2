"""`/api/stats/`, `/metrics`, queue depths and the dashboard's access rules, in-process (no worker)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from ops import queues, stats
from ops.stats import job_dimensions, job_numbers, stats_record
from project.celery import app

pytestmark = pytest.mark.django_db

NOW = 1_773_491_696.0  # a fixed clock: 2026-03-14 12:34:56 UTC


@pytest.fixture
def counted(stats_prefix, monkeypatch):
    """Two jobs counted a minute ago: one success on shop.test, one failure on other.test."""
    monkeypatch.setattr(stats, "clock", lambda: NOW)
    for domain, status, error_class, page_stats, duration in (
        ("shop.test", "succeeded", "", {"pages": 3, "items_new": 2, "status_codes": {"200": 3}}, 4.0),
        ("other.test", "failed", "http_5xx", {"pages": 1, "status_codes": {"503": 1}}, 40.0),
    ):
        numbers = job_numbers(status=status, error_class=error_class, stats=page_stats, duration=duration)
        dimensions = job_dimensions(domain=domain, scraper="link", version="1.0.0")
        stats_record(at=NOW - 60, dimensions=dimensions, numbers=numbers, duration=duration)


@pytest.fixture
def fake_queue(monkeypatch):
    """A broker queue of the tests' own, so real queues (and any worker reading them) are never touched."""
    name = f"trawl-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(queues, "broker_queues", lambda: [name])
    yield name
    queues.broker_redis().delete(*queues.queue_keys(name).values())


def metric_samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_stats_need_a_token(client):
    assert client.get("/api/stats/").status_code in (401, 403)


def test_stats_show_windows_per_domain_and_version(admin_api, counted):
    body = admin_api.get("/api/stats/").json()

    assert body["windows"] == ["900", "3600", "86400", "lifetime"]
    assert body["totals"]["900"]["jobs"] == {"succeeded": 1, "failed": 1, "cancelled": 0, "dead": 0, "total": 2}
    assert body["domains"]["shop.test"]["3600"]["pages"] == 3
    assert body["domains"]["other.test"]["lifetime"]["status_codes"] == {"503": 1}
    assert body["versions"]["link/1.0.0"]["86400"]["error_classes"] == {"http_5xx": 1}
    assert body["scrapers"]["link"]["900"]["items_new"] == 2
    assert set(body["queues"]["queues"]) == {"crawls", "control", "callbacks"}
    assert list(body["queues"]["queues"]["crawls"]["steps"]) == [str(step) for step in range(10)]
    assert body["jobs_active"] == {"queued": 0, "running": 0}
    assert isinstance(body["workers"], list)


def test_queue_keys_are_the_lists_kombu_uses():
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        expected = {step: channel._q_for_pri("crawls", step) for step in range(10)}

    assert queues.queue_keys("crawls") == expected
    assert expected[0] == "crawls" and expected[7] == "crawls:7"


def test_queue_depths_count_each_priority_step(fake_queue):
    keys = queues.queue_keys(fake_queue)
    client = queues.broker_redis()
    client.lpush(keys[0], "a", "b")
    client.lpush(keys[9], "c")

    depth = queues.queue_depths()["queues"][fake_queue]

    assert depth["total"] == 3
    assert (depth["steps"]["0"], depth["steps"]["1"], depth["steps"]["9"]) == (2, 0, 1)


def test_queue_samples_are_kept_newest_last_and_capped(stats_prefix, fake_queue, settings):
    settings.TRAWL_STATS_QUEUE_SAMPLES_KEPT = 3
    for n in range(5):
        queues.broker_redis().lpush(queues.queue_keys(fake_queue)[5], n)
        queues.queue_sample_store(now=1000 + n)

    samples = queues.queue_samples(limit=10)

    assert [sample["t"] for sample in samples] == [1002, 1003, 1004]
    assert [sample["queues"][fake_queue]["steps"]["5"] for sample in samples] == [3, 4, 5]


def test_workers_seen_come_from_job_rows(builtins):
    from crawls.models import CrawlJob
    from ops.workers import workers_from_jobs
    from registry.models import Scraper

    link = Scraper.objects.get(name="link")
    now = timezone.now()
    for worker, status, beat in (
        ("crawl@a/11", "running", now),
        ("crawl@a/12", "running", now - timedelta(seconds=3)),
        ("crawl@a/11", "succeeded", now - timedelta(hours=1)),
        ("crawl@b/7", "succeeded", now - timedelta(minutes=5)),
        ("crawl@old/1", "succeeded", now - timedelta(days=3)),
    ):
        CrawlJob.objects.create(url="https://x.test/", scraper=link, status=status, worker=worker, heartbeat_at=beat)

    nodes = workers_from_jobs(now=now)

    assert set(nodes) == {"crawl@a", "crawl@b"}
    assert (nodes["crawl@a"]["jobs_running"], nodes["crawl@a"]["last_heartbeat"]) == (2, now)
    assert nodes["crawl@b"]["jobs_running"] == 0


def test_metrics_parse_and_carry_the_counters(client, counted, admin_auth):
    response = client.get("/metrics", HTTP_AUTHORIZATION=admin_auth)
    samples = metric_samples(response.content.decode())

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert samples[("trawl_jobs_finished_total", (("status", "succeeded"),))] >= 1
    assert samples[("trawl_domain_pages_total", (("domain", "shop.test"),))] == 3
    assert samples[("trawl_domain_responses_total", (("code", "503"), ("domain", "other.test")))] == 1
    version = (("scraper", "link"), ("version", "1.0.0"))
    assert samples[("trawl_version_job_errors_total", (("error_class", "http_5xx"), *version))] == 1
    assert samples[("trawl_job_duration_seconds_bucket", (("le", "5.0"), *version))] == 1
    assert samples[("trawl_job_duration_seconds_bucket", (("le", "60.0"), *version))] == 2
    assert samples[("trawl_job_duration_seconds_count", version)] == 2
    assert samples[("trawl_job_duration_seconds_sum", version)] == 44
    assert ("trawl_queue_messages", (("priority", "9"), ("queue", "crawls"))) in samples
    assert ("trawl_jobs", (("status", "running"),)) in samples


def test_metrics_count_webhook_deliveries_by_status(client, stats_prefix, admin_auth):
    from callbacks.models import Delivery

    Delivery.objects.create(
        event="job.completed", dedupe_key="job:1", target_url="http://x.test/", payload={}, status="dead"
    )

    samples = metric_samples(client.get("/metrics", HTTP_AUTHORIZATION=admin_auth).content.decode())

    assert samples[("trawl_webhook_deliveries", (("event", "job.completed"), ("status", "dead")))] == 1


def test_metrics_take_the_metrics_token_in_either_scheme(client, settings, stats_prefix):
    settings.TRAWL_STATS_METRICS_TOKEN = "s3cret"

    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Token s3cret").status_code == 200


@pytest.mark.parametrize("settings_module", ["project.settings", "project.settings_production"])
def test_metrics_are_closed_in_every_settings_module(settings_module):
    """Without a token nothing is scraped, and a requester's token is not enough: only admin or metrics tokens."""
    import subprocess
    import sys

    script = (
        "import django; django.setup()\n"
        "from django.test import Client\n"
        "from django.test.utils import setup_test_environment\n"
        "setup_test_environment()\n"
        "print(Client().get('/metrics', secure=True).status_code)\n"
    )
    env = {**__import__("os").environ, "DJANGO_SETTINGS_MODULE": settings_module, "SECRET_KEY": "x" * 50}
    env.pop("TRAWL_STATS_METRICS_TOKEN", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)

    assert out.stdout.strip().splitlines()[-1:] == ["401"], out.stderr[-2000:]


def test_metrics_refuse_a_requester_token_and_take_an_admin_one_as_token_or_bearer(client, api, admin_auth):
    plain = api._credentials["HTTP_AUTHORIZATION"]

    assert client.get("/metrics", HTTP_AUTHORIZATION=plain).status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=plain.replace("Token", "Bearer")).status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=admin_auth).status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION=admin_auth.replace("Token", "Bearer")).status_code == 200


def test_metrics_label_only_the_busiest_domains_and_sum_the_rest(client, stats_prefix, settings, admin_auth):
    settings.TRAWL_METRICS_MAX_DOMAINS = 3
    for number in range(10):
        numbers = job_numbers(status="succeeded", stats={"pages": 1, "requests": 10 - number})
        stats_record(
            at=NOW, dimensions=job_dimensions(domain=f"d{number}.test", scraper="link", version="1"), numbers=numbers
        )

    samples = metric_samples(client.get("/metrics", HTTP_AUTHORIZATION=admin_auth).content.decode())
    domains = {dict(labels)["domain"] for name, labels in samples if name == "trawl_domain_pages_total"}

    assert domains == {"d0.test", "d1.test", "d2.test", "other"}
    assert samples[("trawl_domain_pages_total", (("domain", "other"),))] == 7


def test_a_requester_reads_only_its_own_stats_and_may_not_broadcast(api, requester, stats_prefix):
    from access.services import token_issue

    bob, _ = token_issue(requester_name="bob")
    for tenant, domain in ((requester.pk, "alice.test"), (bob.pk, "bob.test")):
        numbers = job_numbers(status="succeeded", stats={"pages": 2})
        dimensions = job_dimensions(domain=domain, scraper="link", version="1", tenant=tenant)
        stats_record(at=NOW, dimensions=dimensions, numbers=numbers)

    body = api.get("/api/stats/").json()
    refresh = api.get("/api/stats/?refresh_workers=1")

    assert set(body["domains"]) == {"alice.test"}
    assert body["totals"]["lifetime"]["jobs"]["succeeded"] == 1
    assert "workers" not in body and "queues" not in body
    assert refresh.status_code == 403


def test_dashboard_is_for_staff_only(client, django_user_model, stats_prefix):
    user = django_user_model.objects.create_user("viewer", password="pw")
    client.force_login(user)

    response = client.get("/admin/ops/dashboard/")

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_dashboard_page_carries_its_charts_and_data(admin_client, builtins, counted):
    page = admin_client.get("/admin/ops/dashboard/")
    data = admin_client.get("/admin/ops/dashboard/data/").json()

    html = page.content.decode()
    assert page.status_code == 200
    for canvas in ("chart-jobs", "chart-pages", "chart-queues", "chart-throttle", "chart-versions"):
        assert f'id="{canvas}"' in html
    assert "ops/vendor/chart.umd.min.js" in html and "//cdn" not in html
    embedded = json.loads(html.split('<script id="ops-data" type="application/json">')[1].split("</script>")[0])
    assert embedded["jobs_per_minute"]["series"]["failed"][-2] == 1  # the minute before NOW
    assert data["pages_per_domain"]["labels"][:2] == ["shop.test", "other.test"]
    assert {row["scraper"] for row in data["versions"]} >= {"link"}


def test_admin_home_links_to_the_dashboard(admin_client):
    page = admin_client.get("/admin/").content.decode()

    assert 'href="/admin/ops/dashboard/"' in page
    assert "Site administration" in page  # still the admin's own home page around it
