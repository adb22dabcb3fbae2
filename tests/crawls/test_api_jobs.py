"""`/api/jobs/`: what a caller may submit, what it gets back, and who sees which jobs."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from crawls.models import CrawlJob
from items.models import Item, ItemSighting
from registry.models import Scraper, ScraperVersion
from tests.clients import client_for

pytestmark = pytest.mark.django_db

GOOD_URL = "http://shop.test/list-1.html"


@pytest.fixture
def bob(db):
    return client_for("bob")


@pytest.fixture
def alice_job(api, builtins):
    response = api.post("/api/jobs/", {"url": GOOD_URL}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_submit_defaults_to_link_scraper_and_priority_50(api, builtins, requester):
    response = api.post("/api/jobs/", {"url": GOOD_URL}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["url"], body["scraper"], body["priority"], body["status"]) == (GOOD_URL, "link", 50, "queued")
    assert body["items_url"].endswith(f"/api/jobs/{body['id']}/items/")
    job = CrawlJob.objects.get(pk=body["id"])
    assert job.requester == requester


def test_submit_stores_options_and_requested_version(api, builtins):
    spec = {
        "url": GOOD_URL,
        "scraper": "link",
        "version": "1.0.0",
        "variant": "stable",
        "priority": 90,
        "callback_url": "https://hooks.test/trawl",
        "options": {"maxdepth": 2, "allow_regex": ["/list-\\d+"], "attrs": {"team": "pricing"}, "cookie": "a=1"},
    }

    body = api.post("/api/jobs/", spec, format="json").json()

    job = CrawlJob.objects.get(pk=body["id"])
    assert (job.requested_version, job.requested_variant, job.priority) == ("1.0.0", "stable", 90)
    assert job.options == spec["options"]
    assert job.callback_url == "https://hooks.test/trawl"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({}, "url"),
        ({"url": "ftp://shop.test/file"}, "url"),
        ({"url": "http://"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"url": GOOD_URL, "priority": 0}, "priority"),
        ({"url": GOOD_URL, "priority": 101}, "priority"),
        ({"url": GOOD_URL, "bogus": 1}, "bogus"),
        ({"url": GOOD_URL, "scraper": "no-such-scraper"}, "scraper"),
        ({"url": GOOD_URL, "version": "9.9.9"}, "version"),
        ({"url": GOOD_URL, "variant": "nightly"}, "variant"),
        ({"url": GOOD_URL, "variant": "canary"}, "variant"),  # a known variant the scraper has no version of
        ({"url": GOOD_URL, "callback_url": "ftp://hooks.test/"}, "callback_url"),
    ],
)
def test_bad_job_spec_is_400_naming_the_field_and_creates_nothing(api, builtins, spec, field):
    response = api.post("/api/jobs/", spec, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert CrawlJob.objects.count() == 0


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"follow": True}, "follow"),
        ({"allow_regex": ["(unclosed"]}, "allow_regex"),
        ({"deny_regex": ["*bad"]}, "deny_regex"),
        ({"maxdepth": -1}, "maxdepth"),
        ({"maxdepth": 21}, "maxdepth"),
        ({"expires": "tomorrow"}, "expires"),
    ],
)
def test_bad_option_is_400_naming_the_option(api, builtins, options, field):
    response = api.post("/api/jobs/", {"url": GOOD_URL, "options": options}, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["options"], response.json()
    assert CrawlJob.objects.count() == 0


def test_bad_regex_message_says_it_is_not_a_regex(api, builtins):
    response = api.post("/api/jobs/", {"url": GOOD_URL, "options": {"allow_regex": ["(unclosed"]}}, format="json")

    assert "not a valid regular expression" in str(response.json())


def test_deprecated_version_is_refused(api, builtins):
    from django.utils import timezone

    ScraperVersion.objects.filter(scraper__name="link").update(deprecated_at=timezone.now())

    response = api.post("/api/jobs/", {"url": GOOD_URL, "version": "1.0.0"}, format="json")

    assert response.status_code == 400
    assert "version" in response.json()


def test_maxdepth_bounds_are_accepted(api, builtins):
    for depth in (0, 20):
        response = api.post("/api/jobs/", {"url": GOOD_URL, "options": {"maxdepth": depth}}, format="json")
        assert response.status_code == 201, response.content


def test_no_token_is_401(builtins):
    response = APIClient().post("/api/jobs/", {"url": GOOD_URL}, format="json")

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"
    assert CrawlJob.objects.count() == 0


def test_bad_token_is_401(builtins):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    assert client.get("/api/jobs/").status_code == 401
    assert client.post("/api/jobs/", {"url": GOOD_URL}, format="json").status_code == 401


def test_revoked_token_is_401(requester, api):
    from django.utils import timezone

    requester.tokens.update(revoked_at=timezone.now())

    assert api.get("/api/jobs/").status_code == 401


def test_another_requester_cannot_see_or_cancel_my_job(alice_job, bob):
    job_id = alice_job["id"]

    assert bob.get(f"/api/jobs/{job_id}/").status_code == 404
    assert bob.get(f"/api/jobs/{job_id}/items/").status_code == 404
    assert bob.post(f"/api/jobs/{job_id}/cancel/").status_code == 404
    assert bob.get("/api/jobs/").json()["count"] == 0
    assert CrawlJob.objects.get(pk=job_id).status == "queued"


def test_requester_lists_and_reads_its_own_jobs(api, alice_job):
    listing = api.get("/api/jobs/").json()
    detail = api.get(f"/api/jobs/{alice_job['id']}/").json()

    assert [job["id"] for job in listing["results"]] == [alice_job["id"]]
    assert detail["status"] == "queued"
    assert detail["error_class"] == ""


def test_the_job_links_its_items_and_its_log_in_list_and_detail(api, alice_job):
    listed = api.get("/api/jobs/").json()["results"][0]
    detail = api.get(f"/api/jobs/{alice_job['id']}/").json()

    for job in (alice_job, listed, detail):
        assert job["items_url"] == f"http://testserver/api/jobs/{alice_job['id']}/items/"
        assert job["log_url"] == f"http://testserver/api/jobs/{alice_job['id']}/log/"
    log = api.get(detail["log_url"])
    assert log.status_code == 200 and log["Content-Type"].startswith("text/plain")


def test_admin_sees_every_requesters_jobs(alice_job, bob, builtins):
    bob_job = bob.post("/api/jobs/", {"url": GOOD_URL}, format="json").json()
    admin = client_for("ops", admin=True)

    ids = {job["id"] for job in admin.get("/api/jobs/").json()["results"]}

    assert ids == {alice_job["id"], bob_job["id"]}
    assert admin.get(f"/api/jobs/{alice_job['id']}/").status_code == 200


def test_cancel_queued_job_then_cancel_again_conflicts(api, alice_job):
    first = api.post(f"/api/jobs/{alice_job['id']}/cancel/")
    second = api.post(f"/api/jobs/{alice_job['id']}/cancel/")

    assert first.status_code == 202
    assert first.json()["status"] == "cancelled"
    assert CrawlJob.objects.get(pk=alice_job["id"]).finished_at is not None
    assert second.status_code == 409
    assert "cancelled" in str(second.json())


def test_job_items_lists_what_the_job_saw(api, alice_job):
    job = CrawlJob.objects.get(pk=alice_job["id"])
    item = Item.objects.create(
        tenant=job.requester,
        scraper=job.scraper,
        fingerprint="f",
        url="http://shop.test/1",
        data={"title": "One"},
        content_hash="h",
    )
    ItemSighting.objects.create(job=job, item=item, change="new")

    body = api.get(f"/api/jobs/{job.pk}/items/").json()

    assert body["count"] == 1
    assert body["results"][0]["data"] == {"title": "One"}
    assert body["results"][0]["change"] == "new"


def test_unknown_job_id_is_404(api):
    assert api.get("/api/jobs/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_non_builtin_scraper_with_default_version_is_accepted(api, builtins):
    scraper = Scraper.objects.create(name="demo_shop")
    ScraperVersion.objects.create(
        scraper=scraper, version="1.2.0", spider="runtime.spiders.link.LinkSpider", is_default=True
    )

    response = api.post("/api/jobs/", {"url": GOOD_URL, "scraper": "demo_shop"}, format="json")

    assert response.status_code == 201
    assert response.json()["scraper"] == "demo_shop"


def test_openapi_schema_describes_jobs(client):
    response = client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert "/api/jobs/" in schema["paths"]
    assert "post" in schema["paths"]["/api/jobs/"]


def test_swagger_ui_is_served_without_a_cdn(client):
    response = client.get("/api/docs/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "swagger-ui" in html
    assert "drf_spectacular_sidecar" in html
    for cdn in ("cdn.jsdelivr", "unpkg.com", "cdnjs", "//cdn."):
        assert cdn not in html
