"""`/api/throttles/` and the admin pages: who may change rules, what is refused, and that changes reach Redis."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from crawls.models import CrawlJob
from project.redis import get_redis
from tests.clients import client_for
from throttling.buckets import BLOCKED, GRANTED, WAIT, Limits
from throttling.models import DomainThrottle
from throttling.services import throttle_buckets, throttle_rules_load

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


@pytest.fixture
def admin_api(db):
    return client_for("ops", admin=True)


@pytest.fixture
def send(admin_api, django_capture_on_commit_callbacks):
    """Call the API as an admin and run what the request queued for after its commit (the Redis publication)."""

    def call(method: str, path: str, body: dict | None = None):
        with django_capture_on_commit_callbacks(execute=True):
            return getattr(admin_api, method)(path, body, format="json")

    return call


def mirrored(domain: str) -> Limits | None:
    """The rule as running crawls see it (Redis), or None."""
    value = get_redis().get(throttle_buckets().rule_key(domain))
    return Limits.from_redis(value) if value else None


def take(host: str, egress: str = "worker"):
    return throttle_buckets().take(get_redis(), host=host, egress=egress)


def test_only_admin_tokens_manage_throttles(api, admin_api):
    assert api.get("/api/throttles/").status_code == 403
    assert api.post("/api/throttles/", {"domain": "example.com"}, format="json").status_code == 403
    assert APIClient().get("/api/throttles/").status_code in (401, 403)
    assert admin_api.get("/api/throttles/").status_code == 200


def test_create_then_read_list_and_mirror(send, admin_api):
    body = {"domain": "Shop.Example.COM", "rate": 0.5, "burst": 3, "ip_rate": 0.25, "ip_burst": 2, "scale": 0.5}

    created = send("post", "/api/throttles/", body)

    assert created.status_code == 201, created.content
    assert created.json() | {"updated_at": None} == {
        "domain": "shop.example.com",
        "rate": 0.5,
        "burst": 3,
        "ip_rate": 0.25,
        "ip_burst": 2,
        "scale": 0.5,
        "blocked": False,
        "adaptive": True,
        "concurrency": 8,
        "obey_crawl_delay": True,
        "max_pages_per_job": None,
        "robots_delay": None,
        "effective_rate": 0.25,
        "effective_ip_rate": 0.125,
        "adaptive_factor": 1.0,
        "adaptive_reason": "at the configured rate",
        "note": "",
        "updated_at": None,
    }
    assert admin_api.get("/api/throttles/shop.example.com/").json()["rate"] == 0.5
    assert [row["domain"] for row in admin_api.get("/api/throttles/").json()["results"]] == ["shop.example.com"]
    assert mirrored("shop.example.com") == Limits(rate=0.5, burst=3, ip_rate=0.25, ip_burst=2, scale=0.5)


def test_fields_left_out_take_the_defaults_for_unknown_domains(send):
    created = send("post", "/api/throttles/", {"domain": "example.com"}).json()

    defaults = settings.TRAWL_THROTTLE_DEFAULTS
    assert (created["rate"], created["burst"], created["ip_rate"], created["ip_burst"]) == (
        defaults["rate"],
        defaults["burst"],
        defaults["ip_rate"],
        defaults["ip_burst"],
    )
    assert (created["scale"], created["blocked"]) == (1.0, False)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"domain": "http://example.com/"}, "domain"),
        ({"domain": "*.example.com"}, "domain"),
        ({}, "domain"),
        ({"domain": "example.com", "rate": -1}, "rate"),
        ({"domain": "example.com", "ip_rate": "fast"}, "ip_rate"),
        ({"domain": "example.com", "burst": 0}, "burst"),
        ({"domain": "example.com", "ip_burst": 0}, "ip_burst"),
        ({"domain": "example.com", "scale": 1.5}, "scale"),
        ({"domain": "example.com", "blocked": "maybe"}, "blocked"),
        ({"domain": "example.com", "rpm": 60}, "rpm"),
    ],
)
def test_bad_input_is_refused_naming_the_field(send, body, field):
    response = send("post", "/api/throttles/", body)

    assert response.status_code == 400
    assert field in response.json()
    assert not DomainThrottle.objects.exists()


def test_a_second_rule_for_the_same_domain_is_refused(send):
    send("post", "/api/throttles/", {"domain": "example.com"})

    response = send("post", "/api/throttles/", {"domain": "EXAMPLE.com"})

    assert response.status_code == 400
    assert "domain" in response.json()


def test_patch_changes_running_crawls_buckets_at_once(send):
    send("post", "/api/throttles/", {"domain": "example.com", "rate": 100, "burst": 100})
    throttle_rules_load()
    assert take("www.example.com").status == GRANTED

    response = send("patch", "/api/throttles/example.com/", {"rate": 0, "burst": 1})
    burst_left = take("www.example.com")
    after = take("www.example.com")

    assert response.status_code == 200, response.content
    assert response.json()["rate"] == 0 and response.json()["ip_rate"] == settings.TRAWL_THROTTLE_DEFAULTS["ip_rate"]
    assert burst_left.status == GRANTED  # the bucket keeps its one token (new burst)...
    assert after.status == WAIT  # ...and at rate 0 nothing refills


def test_put_replaces_the_whole_rule_and_may_rename_it(send, admin_api):
    send("post", "/api/throttles/", {"domain": "example.com", "rate": 9, "blocked": True, "note": "old"})

    response = send("put", "/api/throttles/example.com/", {"domain": "api.example.com", "rate": 3})

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["domain"], body["rate"], body["blocked"], body["note"]) == ("api.example.com", 3, False, "")
    assert admin_api.get("/api/throttles/example.com/").status_code == 404
    assert mirrored("example.com") is None and mirrored("api.example.com").rate == 3


def test_an_empty_patch_is_refused(send):
    send("post", "/api/throttles/", {"domain": "example.com"})

    response = send("patch", "/api/throttles/example.com/", {})

    assert response.status_code == 400


def test_delete_removes_the_rule_and_its_mirror(send, admin_api):
    send("post", "/api/throttles/", {"domain": "example.com", "blocked": True})

    response = send("delete", "/api/throttles/example.com/")

    assert response.status_code == 204
    assert not DomainThrottle.objects.exists()
    assert mirrored("example.com") is None
    assert admin_api.get("/api/throttles/example.com/").status_code == 404


def test_jobs_for_a_blocked_domain_are_refused_naming_url(send, api, builtins):
    send("post", "/api/throttles/", {"domain": "example.com", "blocked": True})
    send("post", "/api/throttles/", {"domain": "open.example.com"})

    refused = api.post("/api/jobs/", {"url": "https://shop.example.com/list"}, format="json")
    allowed = api.post("/api/jobs/", {"url": "https://open.example.com/"}, format="json")

    assert refused.status_code == 400
    assert "url" in refused.json() and "blocked" in refused.json()["url"][0]
    assert allowed.status_code == 201, "an exact host rule beats its registered domain's"
    assert CrawlJob.objects.count() == 1


def test_blocking_then_unblocking_applies_to_the_buckets(send):
    send("post", "/api/throttles/", {"domain": "example.com"})
    throttle_rules_load()

    send("patch", "/api/throttles/example.com/", {"blocked": True})
    blocked = take("example.com")
    send("patch", "/api/throttles/example.com/", {"blocked": False})

    assert blocked.status == BLOCKED
    assert take("example.com").status == GRANTED


# --- admin pages -------------------------------------------------------------------------------


@pytest.fixture
def staff(client, db):
    user = get_user_model().objects.create_superuser("root", "root@localhost", "pw")
    client.force_login(user)
    return client


def test_admin_pages_list_add_and_publish(staff, django_capture_on_commit_callbacks):
    assert staff.get("/admin/throttling/domainthrottle/").status_code == 200
    assert staff.get("/admin/throttling/domainthrottle/add/").status_code == 200
    assert staff.get("/admin/throttling/proxy/").status_code == 200
    form = {"domain": "Example.com", "rate": "1.5", "burst": "4", "ip_rate": "1", "ip_burst": "2", "scale": "1"}

    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post("/admin/throttling/domainthrottle/add/", {**form, "note": ""})

    assert response.status_code == 302, response.content.decode()[:2000]
    assert DomainThrottle.objects.get().domain == "example.com"
    assert mirrored("example.com").rate == 1.5


def test_admin_refuses_a_bad_domain_or_burst(staff):
    form = {"domain": "http://x/", "rate": "1", "burst": "0", "ip_rate": "1", "ip_burst": "1", "scale": "1", "note": ""}

    response = staff.post("/admin/throttling/domainthrottle/add/", form)

    assert response.status_code == 200  # the form again, with errors
    assert set(response.context["adminform"].form.errors) == {"domain", "burst"}
    assert not DomainThrottle.objects.exists()


def test_admin_block_action_publishes(staff, django_capture_on_commit_callbacks):
    throttle = DomainThrottle.objects.create(domain="example.com")

    with django_capture_on_commit_callbacks(execute=True):
        action = {"action": "block", "_selected_action": [throttle.pk], "index": 0}
        staff.post("/admin/throttling/domainthrottle/", action)

    assert DomainThrottle.objects.get().blocked
    assert mirrored("example.com").blocked
