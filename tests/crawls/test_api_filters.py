"""List endpoints filter by what users ask for and refuse a query parameter they do not know, naming it; a job's
JSON links its screenshots."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from crawls.models import Batch, CrawlJob, JobScreenshot
from registry.models import Scraper, ScraperVersion
from sources.models import Source
from tests.clients import client_for

pytestmark = pytest.mark.django_db

NOW = timezone.now()


@pytest.fixture
def jobs(requester, builtins):
    """alice's jobs: a failed one of `other` in a batch, a succeeded one of a source, a queued one from yesterday."""
    link = Scraper.objects.get(name="link")
    other = Scraper.objects.create(name="other")
    ScraperVersion.objects.create(scraper=other, version="1.0.0", spider="runtime.spiders.link.LinkSpider")
    batch = Batch.objects.create(requester=requester, name="b", total=1)
    source = Source.objects.create(url="http://shop.test/cat", scraper=link)
    failed = CrawlJob.objects.create(
        url="http://shop.test/a", scraper=other, requester=requester, batch=batch, status="failed",
        error_class="http_5xx", finished_at=NOW - timedelta(minutes=5),
    )  # fmt: skip
    succeeded = CrawlJob.objects.create(
        url="http://shop.test/b", scraper=link, requester=requester, source=source, status="succeeded",
        finished_at=NOW - timedelta(hours=2),
    )  # fmt: skip
    old = CrawlJob.objects.create(
        url="http://shop.test/c", scraper=link, requester=requester, queued_at=NOW - timedelta(days=1)
    )
    return {"failed": failed, "succeeded": succeeded, "old": old, "batch": batch, "source": source}


def listed(client, **params) -> set[str]:
    response = client.get("/api/jobs/", params)
    assert response.status_code == 200, response.content
    return {job["id"] for job in response.json()["results"]}


def ids(*jobs) -> set[str]:
    return {str(job.pk) for job in jobs}


def test_jobs_filter_by_scraper_status_error_class_batch_and_source(api, jobs):
    assert listed(api, scraper="other", status="failed") == ids(jobs["failed"])
    assert listed(api, scraper="link") == ids(jobs["succeeded"], jobs["old"])
    assert listed(api, status="queued") == ids(jobs["old"])
    assert listed(api, error_class="http_5xx") == ids(jobs["failed"])
    assert listed(api, batch=str(jobs["batch"].pk)) == ids(jobs["failed"])
    assert listed(api, source=jobs["source"].pk) == ids(jobs["succeeded"])
    assert listed(api, scraper="nobody") == set()


def test_jobs_filter_by_time_ranges(api, jobs):
    hour_ago = (NOW - timedelta(hours=1)).isoformat()
    assert listed(api, queued_before=(NOW - timedelta(hours=1)).isoformat()) == ids(jobs["old"])
    assert listed(api, queued_since=hour_ago) == ids(jobs["failed"], jobs["succeeded"])
    assert listed(api, finished_since=hour_ago) == ids(jobs["failed"])
    assert listed(api, finished_before=hour_ago) == ids(jobs["succeeded"])
    # A `+01:00` offset sent unencoded arrives as a space; it still means the same moment.
    hour_ago_at_plus_one = NOW.replace(tzinfo=None).isoformat() + "+01:00"
    assert listed(api, finished_since=hour_ago_at_plus_one.replace("+", " ")) == ids(jobs["failed"])


def test_filters_keep_pagination_and_tenancy(api, jobs):
    page = api.get("/api/jobs/", {"scraper": "link", "limit": 1, "offset": 1}).json()
    assert page["count"] == 2 and len(page["results"]) == 1
    bob = client_for("bob")
    assert bob.get("/api/jobs/", {"status": "failed"}).json()["count"] == 0
    assert bob.get("/api/jobs/", {"batch": str(jobs["batch"].pk)}).json()["count"] == 0


def test_unknown_query_parameter_is_a_400_naming_it(api, jobs):
    response = api.get("/api/jobs/", {"scraper": "link", "statuss": "failed", "page": "2"})

    assert response.status_code == 400
    assert response.json() == {"page": ["Unknown query parameter."], "statuss": ["Unknown query parameter."]}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "broken"}, "status"),
        ({"finished_since": "yesterday"}, "finished_since"),
        ({"batch": "not-a-uuid"}, "batch"),
        ({"source": "hub"}, "source"),
        ({"source": str(2**63)}, "source"),  # past what a database stores: a 400, not the database's error
        ({"queued_before": "9999-12-31T23:59:59-23:00"}, "queued_before"),
    ],
)
def test_a_bad_filter_value_is_a_400_naming_it(api, jobs, params, field):
    response = api.get("/api/jobs/", params)

    assert response.status_code == 400 and list(response.json()) == [field], response.content


def test_batches_filter_by_status_and_time(api, requester):
    done = Batch.objects.create(requester=requester, name="done", total=0, status="completed", finished_at=NOW)
    Batch.objects.create(requester=requester, name="open", total=1, status="running")

    completed = api.get("/api/batches/", {"status": "completed"}).json()["results"]
    since = api.get("/api/batches/", {"finished_since": (NOW - timedelta(minutes=1)).isoformat()}).json()["results"]

    assert [batch["id"] for batch in completed] == [str(done.pk)] == [batch["id"] for batch in since]
    assert api.get("/api/batches/", {"state": "running"}).json() == {"state": ["Unknown query parameter."]}


@pytest.mark.parametrize(
    "path",
    [
        "/api/jobs/",
        "/api/batches/",
        "/api/items/",
        "/api/sources/",
        "/api/scrapers/",
        "/api/scrapers/link/versions/",
        "/api/throttles/",
        "/api/jobs/{job}/items/",
        "/api/jobs/{job}/screenshots/",
        "/api/sources/{source}/runs/",
    ],
)
def test_every_list_refuses_an_unknown_query_parameter(admin_api, jobs, path):
    url = path.format(job=jobs["failed"].pk, source=jobs["source"].pk)

    assert admin_api.get(url, {"limit": 5}).status_code == 200
    response = admin_api.get(url, {"limit": 5, "sort": "name"})

    assert response.status_code == 400 and response.json() == {"sort": ["Unknown query parameter."]}


def test_without_a_token_an_unknown_parameter_is_still_a_401(db):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/jobs/", {"whatever": "1"}).status_code == 401


def test_openapi_documents_the_list_filters(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()

    def parameters(path: str) -> set[str]:
        return {parameter["name"] for parameter in schema["paths"][path]["get"]["parameters"]}

    assert {"scraper", "status", "source", "batch", "queued_since", "finished_before", "limit"} <= parameters(
        "/api/jobs/"
    )
    assert {"status", "created_since", "finished_before"} <= parameters("/api/batches/")
    assert {"changed_since", "changed_before", "scraper"} <= parameters("/api/items/")
    assert {"kind", "scraper", "enabled", "due", "parent"} <= parameters("/api/sources/")


def test_a_job_links_its_screenshots_with_their_count(api, jobs):
    job = jobs["failed"]
    JobScreenshot.objects.create(job=job, url=job.url, reason="failure", image=b"\xff\xd8jpeg")
    JobScreenshot.objects.create(job=job, url=job.url, reason="failure", image=b"\xff\xd8jpeg")

    listed_job = next(row for row in api.get("/api/jobs/").json()["results"] if row["id"] == str(job.pk))
    detail = api.get(f"/api/jobs/{job.pk}/").json()
    other = api.get(f"/api/jobs/{jobs['old'].pk}/").json()

    for shown in (listed_job, detail):
        assert shown["screenshots_url"] == f"http://testserver/api/jobs/{job.pk}/screenshots/"
        assert shown["screenshot_count"] == 2
    assert other["screenshot_count"] == 0
    shots = api.get(detail["screenshots_url"]).json()
    assert len(shots) == 2 and api.get(shots[0]["image_url"])["Content-Type"] == "image/jpeg"
    created = api.post("/api/jobs/", {"url": "http://shop.test/d"}, format="json").json()
    assert created["screenshot_count"] == 0 and created["screenshots_url"].endswith("/screenshots/")
