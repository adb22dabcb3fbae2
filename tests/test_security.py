"""Keeping strangers out: production settings, the private-target guard, body limits, and who sees what."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from crawls.models import Batch, CrawlJob
from project.net import address_is_public, private_target_reason
from tests.clients import client_for
from tests.workers import BASE_DIR

PUBLIC_IP_URL = "http://93.184.216.34/page"  # an IP literal: no DNS lookup needed in tests


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings_production", **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=full_env, capture_output=True, text=True, timeout=120
    )


# --- production settings ------------------------------------------------------------------------------------


def test_check_deploy_is_clean_with_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=secrets.token_urlsafe(50), DEBUG="")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_refuse_to_start_without_a_secret_key():
    result = manage("check", SECRET_KEY="")

    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_settings_turn_the_private_target_guard_on_and_scrapy_remote_access_off():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.TRAWL_BLOCK_PRIVATE_TARGETS, s.DEBUG, s.SESSION_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.TRAWL_SCRAPY_SETTINGS['TELNETCONSOLE_ENABLED'], s.TRAWL_SCRAPY_SETTINGS['REMOTE_CONTROL_ENABLED'])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings_production", "SECRET_KEY": "x" * 60}
    env.pop("DEBUG", None)
    result = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True)

    assert result.stdout.split() == ["True", "False", "True", "True", "False", "False"], result.stderr


# --- the private-target guard -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.9", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("224.0.0.1", False),
        ("93.184.216.34", True),
        ("2606:4700:4700::1111", True),
    ],
)
def test_address_classification(address, public):
    assert address_is_public(address) is public


def test_hosts_are_judged_by_what_they_resolve_to():
    assert "private" in private_target_reason("http://localhost:8000/x")
    assert "does not resolve" in private_target_reason("http://nonexistent.invalid/")
    assert private_target_reason(PUBLIC_IP_URL) == ""


@pytest.fixture
def guard(settings):
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = True
    return settings


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",
        "http://localhost/",
        "http://169.254.169.254/latest/",
        "http://[::1]/",
        "http://10.0.0.5/",
    ],
)
def test_guard_refuses_private_crawl_urls_of_plain_requesters_naming_the_field(api, builtins, guard, url):
    response = api.post("/api/jobs/", {"url": url}, format="json")

    assert response.status_code == 400, response.content
    assert "private" in response.json()["url"][0]
    assert CrawlJob.objects.count() == 0


@pytest.mark.django_db
def test_guard_lets_public_urls_through_and_admins_crawl_internal_sites_but_never_call_them_back(api, builtins, guard):
    admin = client_for("ops", admin=True)

    assert api.post("/api/jobs/", {"url": PUBLIC_IP_URL}, format="json").status_code == 201
    assert admin.post("/api/jobs/", {"url": "http://127.0.0.1:8000/"}, format="json").status_code == 201
    refused = admin.post("/api/jobs/", {"url": PUBLIC_IP_URL, "callback_url": "http://127.0.0.1:9/hook"}, format="json")
    assert refused.status_code == 400 and "callback_url" in refused.json()


@pytest.mark.django_db
def test_guard_checks_every_spec_and_the_callback_of_a_batch(api, builtins, guard):
    bad_spec = api.post(
        "/api/batches/", {"jobs": [{"url": PUBLIC_IP_URL}, {"url": "http://192.168.0.1/"}]}, format="json"
    )
    bad_callback = api.post(
        "/api/batches/", {"callback_url": "http://localhost/hook", "jobs": [{"url": PUBLIC_IP_URL}]}, format="json"
    )

    assert bad_spec.status_code == 400 and "url" in bad_spec.json()["jobs"]["1"]
    assert bad_callback.status_code == 400 and "callback_url" in bad_callback.json()
    assert Batch.objects.count() == 0


@pytest.mark.django_db
def test_guard_off_lets_local_sites_through(api, builtins, settings):
    settings.TRAWL_BLOCK_PRIVATE_TARGETS = False

    response = api.post("/api/jobs/", {"url": "http://127.0.0.1:8000/", "callback_url": "http://localhost/h"})

    assert response.status_code == 201, response.content


def test_webhook_delivery_refuses_a_private_target_without_sending_anything(guard):
    from callbacks.transport import post_signed
    from tests.callbacks.harness import Receiver

    with Receiver() as receiver:
        result = post_signed(url=receiver.url, payload={"a": 1}, headers={}, secret="s", timeout=2)

        assert not result.ok and result.error.startswith("refused:")
        assert receiver.events() == []


# --- bodies and malformed input -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_body_over_the_limit_is_413_before_any_parsing(api, builtins, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    huge = {"url": PUBLIC_IP_URL, "options": {"attrs": {"blob": "x" * 20_000}}}

    response = api.post("/api/jobs/", huge, format="json")

    assert response.status_code == 413
    assert CrawlJob.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [b"{", b"[]", b'"url"', b"null", b'{"url": 5}', b'{"url": "http://x.test/", "priority": "NaN"}', b"\xff\xfe"],
)
def test_malformed_json_is_a_400_not_a_500(api, builtins, body):
    response = api.generic("POST", "/api/jobs/", body, content_type="application/json")

    assert response.status_code == 400, response.content


# --- who sees what -----------------------------------------------------------------------------------------


@pytest.fixture
def bobs(db, builtins):
    """bob's job and batch, through the API like any requester."""
    bob = client_for("bob")
    job = bob.post("/api/jobs/", {"url": PUBLIC_IP_URL}, format="json").json()
    batch = bob.post("/api/batches/", {"jobs": [{"url": PUBLIC_IP_URL}]}, format="json").json()
    return {"job": job["id"], "batch": batch["id"]}


@pytest.mark.django_db
def test_a_requester_cannot_read_list_or_cancel_anothers_jobs(api, bobs):
    job_id = bobs["job"]

    assert api.get(f"/api/jobs/{job_id}/").status_code == 404
    assert api.get(f"/api/jobs/{job_id}/items/").status_code == 404
    assert api.get(f"/api/jobs/{job_id}/items/?format=jsonl").status_code == 404
    assert api.post(f"/api/jobs/{job_id}/cancel/").status_code == 404
    assert api.get("/api/jobs/").json()["count"] == 0
    assert job_id not in api.get("/api/jobs/?limit=500").content.decode()
    assert CrawlJob.objects.get(pk=job_id).status == "queued"


@pytest.mark.django_db
def test_a_requester_cannot_read_list_or_cancel_anothers_batches(api, bobs):
    batch_id = bobs["batch"]

    assert api.get(f"/api/batches/{batch_id}/").status_code == 404
    assert api.delete(f"/api/batches/{batch_id}/").status_code == 404
    assert api.get("/api/batches/").json()["count"] == 0
    batch = Batch.objects.get(pk=batch_id)
    assert batch.status != "cancelled" and batch.finished_at is None
    assert not batch.jobs.filter(status="cancelled").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/api/scrapers/", {"name": "mine", "description": "x"}),
        ("post", "/api/sources/", {"url": PUBLIC_IP_URL, "scraper": "link"}),
        ("post", "/api/throttles/", {"domain": "example.com", "rate": 1, "burst": 1}),
        ("get", "/api/sources/", None),
    ],
)
def test_plain_requesters_cannot_manage_scrapers_sources_or_throttles(api, builtins, method, path, body):
    response = getattr(api, method)(path, body, format="json") if body else getattr(api, method)(path)

    assert response.status_code == 403, response.content


@pytest.mark.django_db
def test_the_admin_site_is_for_staff_only(client, django_user_model):
    user = django_user_model.objects.create_user(username="plain", password="pw")
    client.force_login(user)

    response = client.get("/admin/")

    assert response.status_code == 302 and "/admin/login/" in response["Location"]
