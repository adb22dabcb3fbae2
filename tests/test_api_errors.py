"""How the API answers a caller who got something slightly wrong: `Bearer` works like `Token`, a body that is not
JSON is a 415 naming the type to send, and every 404 under /api/ is JSON (a malformed id included)."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from crawls.models import CrawlJob

pytestmark = pytest.mark.django_db

BODY = json.dumps({"url": "http://shop.test/list-1.html"})


def client_with(authorization: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=authorization)
    return client


# --- Authorization: Bearer -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "bearer"])
def test_a_token_is_accepted_as_token_or_bearer(requester, builtins, sent_tasks, scheme):
    client = client_with(f"{scheme} {requester.plain_token}")

    created = client.post("/api/jobs/", BODY, content_type="application/json")
    listed = client.get("/api/jobs/")

    assert created.status_code == 201, created.content
    assert listed.status_code == 200 and listed.json()["count"] == 1
    assert CrawlJob.objects.get().requester == requester


def test_a_wrong_bearer_token_is_a_401_like_a_wrong_token(requester):
    for scheme in ("Token", "Bearer"):
        refused = client_with(f"{scheme} not-{requester.plain_token}").get("/api/jobs/")
        assert refused.status_code == 401 and refused.json() == {"detail": "Invalid or revoked token."}


def test_no_credentials_401_names_both_schemes(db):
    refused = APIClient().get("/api/jobs/")

    assert refused.status_code == 401
    assert "Token <token>" in refused.json()["detail"] and "Bearer <token>" in refused.json()["detail"]


# --- Content-Type ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "named"),
    [
        ("application/x-www-form-urlencoded", "Content-Type 'application/x-www-form-urlencoded'"),  # curl -d
        ("", "no Content-Type"),
        ("text/plain", "Content-Type 'text/plain'"),
        ("multipart/form-data; boundary=xyz", "Content-Type 'multipart/form-data'"),
    ],
)
def test_a_body_that_is_not_declared_json_is_a_415_naming_application_json(api, builtins, content_type, named):
    for path in ("/api/jobs/", "/api/batches/"):
        refused = api.generic("POST", path, BODY, content_type=content_type)

        assert refused.status_code == 415, refused.content
        detail = refused.json()["detail"]
        assert named in detail and "Content-Type: application/json" in detail, detail
    assert not CrawlJob.objects.exists()


def test_a_version_upload_may_also_be_multipart(admin_api, builtins):
    refused = admin_api.post("/api/scrapers/link/versions/", "version=9.9.9", content_type="text/plain")

    assert refused.status_code == 415
    assert "application/json or multipart/form-data" in refused.json()["detail"]
    form = admin_api.post("/api/scrapers/link/versions/", {"version": "9.9.9"}, format="multipart")
    assert form.status_code == 400 and "package" in form.json(), form.content  # parsed as a form: wants its wheel


def test_a_bodiless_post_needs_no_content_type(api, builtins, sent_tasks):
    job = api.post("/api/jobs/", BODY, content_type="application/json").json()

    cancelled = api.generic("POST", f"/api/jobs/{job['id']}/cancel/", "", content_type="")

    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"


# --- 404s --------------------------------------------------------------------------------------------------------


NOT_FOUND = [
    "/api/jobs/not-a-job-id/",
    "/api/jobs/12345/log/",
    "/api/jobs/6f1c2d3e-0000-4000-8000-000000000000/",  # well formed, nobody's
    "/api/batches/x/",
    "/api/no-such-endpoint/",
]


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
@pytest.mark.parametrize("path", NOT_FOUND)
def test_every_404_under_api_is_json(api, settings, debug, path):
    settings.DEBUG = debug

    response = api.get(path)

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    assert response.json()["detail"].startswith(("Not found", "No CrawlJob", "No Batch"))


def test_pages_outside_the_api_keep_django_s_404_and_the_api_its_slash_redirect(api, settings):
    settings.DEBUG = False

    page = api.get("/no-such-page/")
    redirect = api.get("/api/jobs")

    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    assert redirect.status_code == 301 and redirect["Location"].endswith("/api/jobs/")
