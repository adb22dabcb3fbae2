"""`/api/batches/`: submitting many jobs at once, all-or-nothing validation, reading, cancelling, and scoping."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from crawls.live.cancel import cancel_requested, cancel_requested_batch
from crawls.models import Batch, CrawlJob
from tests.clients import client_for

pytestmark = pytest.mark.django_db

SHOP = "http://shop.test"


def specs(count: int) -> list[dict]:
    return [{"url": f"{SHOP}/p/{n}"} for n in range(count)]


def submit(api, django_capture_on_commit_callbacks, **body):
    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post("/api/batches/", body, format="json")
    return response, callbacks


def test_submit_creates_the_batch_and_its_queued_jobs_and_queues_one_launcher(
    api, builtins, requester, django_capture_on_commit_callbacks
):
    jobs = [*specs(3), {"url": f"{SHOP}/urgent", "priority": 90, "callback_url": "https://hooks.test/j"}]

    response, callbacks = submit(
        api,
        django_capture_on_commit_callbacks,
        name="nightly",
        priority=20,
        callback_url="https://hooks.test/b",
        jobs=jobs,
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "total", "status"}
    assert (body["total"], body["status"]) == (4, "pending")
    batch = Batch.objects.get(pk=body["id"])
    assert (batch.requester, batch.name, batch.priority, batch.callback_url) == (
        requester,
        "nightly",
        20,
        "https://hooks.test/b",
    )
    jobs_by_url = {job.url: job for job in CrawlJob.objects.filter(batch=batch)}
    assert len(jobs_by_url) == 4
    assert {job.status for job in jobs_by_url.values()} == {"queued"}
    assert {job.requester for job in jobs_by_url.values()} == {requester}
    assert jobs_by_url[f"{SHOP}/p/0"].priority == 20, "a spec without priority takes the batch's"
    assert (jobs_by_url[f"{SHOP}/urgent"].priority, jobs_by_url[f"{SHOP}/urgent"].callback_url) == (
        90,
        "https://hooks.test/j",
    )
    # The request publishes nothing itself: one launcher task, queued after commit, builds the chord.
    assert len(callbacks) == 1


def test_one_bad_spec_is_named_and_nothing_is_created(api, builtins, django_capture_on_commit_callbacks):
    jobs = specs(5)
    jobs[3] = {"url": "ftp://shop.test/file"}

    response, callbacks = submit(api, django_capture_on_commit_callbacks, jobs=jobs)

    assert response.status_code == 400
    assert list(response.json()) == ["jobs"]
    assert list(response.json()["jobs"]) == ["3"]
    assert "url" in response.json()["jobs"]["3"]
    assert (Batch.objects.count(), CrawlJob.objects.count(), len(callbacks)) == (0, 0, 0)


def test_specs_the_registry_refuses_are_all_named_and_nothing_is_created(
    api, builtins, django_capture_on_commit_callbacks
):
    jobs = specs(4)
    jobs[1] = {"url": f"{SHOP}/a", "scraper": "nope"}
    jobs[2] = {"url": f"{SHOP}/b", "version": "9.9.9"}

    response, _ = submit(api, django_capture_on_commit_callbacks, jobs=jobs)

    assert response.status_code == 400
    errors = response.json()["jobs"]
    assert set(errors) == {"1", "2"}
    assert "nope" in errors["1"]["scraper"][0]
    assert "9.9.9" in errors["2"]["version"][0]
    assert (Batch.objects.count(), CrawlJob.objects.count()) == (0, 0)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"jobs": []}, "jobs"),
        ({}, "jobs"),
        ({"jobs": [{"url": f"{SHOP}/a", "colour": "red"}]}, "jobs"),
        ({"jobs": specs(1), "callback_url": "not a url"}, "callback_url"),
        ({"jobs": specs(1), "priority": 101}, "priority"),
        ({"jobs": specs(1), "when": "now"}, "when"),
        ({"jobs": ["http://shop.test/a"]}, "jobs"),
    ],
)
def test_bad_input_is_400_naming_the_field(api, builtins, body, field):
    response = api.post("/api/batches/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert (Batch.objects.count(), CrawlJob.objects.count()) == (0, 0)


def test_unknown_field_inside_a_spec_is_named_with_its_index(api, builtins):
    response = api.post("/api/batches/", {"jobs": [*specs(2), {"url": f"{SHOP}/a", "colour": "red"}]}, format="json")

    assert response.json() == {"jobs": {"2": {"colour": ["Unknown field."]}}}


def test_the_maximum_batch_size_is_configurable(api, builtins, settings):
    settings.TRAWL_BATCH_MAX_JOBS = 3

    too_many = api.post("/api/batches/", {"jobs": specs(4)}, format="json")
    enough = api.post("/api/batches/", {"jobs": specs(3)}, format="json")

    assert too_many.status_code == 400
    assert "at most 3" in too_many.json()["jobs"][0]
    assert enough.status_code == 201


def test_read_shows_status_live_totals_and_jobs(api, builtins):
    batch_id = api.post("/api/batches/", {"jobs": specs(3)}, format="json").json()["id"]
    first = CrawlJob.objects.filter(batch_id=batch_id).order_by("queued_at").first()
    CrawlJob.objects.filter(pk=first.pk).update(status="failed", error_class="dns")

    detail = api.get(f"/api/batches/{batch_id}/").json()
    listing = api.get("/api/batches/").json()

    assert (detail["status"], detail["total"], detail["done"]) == ("pending", 3, 1)
    assert detail["totals"]["queued"] == 2 and detail["totals"]["failed"] == 1
    assert len(detail["jobs"]) == 3
    assert {(job["status"], job["error_class"]) for job in detail["jobs"]} == {("queued", ""), ("failed", "dns")}
    assert listing["count"] == 1
    assert listing["results"][0]["totals"] == detail["totals"]
    assert "jobs" not in listing["results"][0]


def test_delete_cancels_queued_jobs_and_flags_the_batch(api, builtins, django_capture_on_commit_callbacks):
    batch_id = api.post("/api/batches/", {"jobs": specs(3)}, format="json").json()["id"]
    running = CrawlJob.objects.filter(batch_id=batch_id).order_by("queued_at").first()
    CrawlJob.objects.filter(pk=running.pk).update(status="running")

    with django_capture_on_commit_callbacks() as callbacks:
        response = api.delete(f"/api/batches/{batch_id}/")

    assert response.status_code == 202, response.content
    assert response.json()["status"] == "cancelled"
    statuses = dict(CrawlJob.objects.filter(batch_id=batch_id).values_list("id", "status"))
    assert statuses.pop(running.pk) == "running", "a running crawl stops itself when it sees its flag"
    assert set(statuses.values()) == {"cancelled"}
    assert cancel_requested_batch(batch_id=batch_id)
    assert cancel_requested(job_id=running.pk)
    queued_by_cancel = [callback.__qualname__ for callback in callbacks if "batch_cancel" in callback.__qualname__]
    assert len(queued_by_cancel) == 1, "a finalize is queued, which ends the batch once the running crawl stops"


def test_delete_of_an_ended_batch_is_409(api, builtins):
    batch_id = api.post("/api/batches/", {"jobs": specs(1)}, format="json").json()["id"]
    Batch.objects.filter(pk=batch_id).update(status="completed", finished_at="2026-01-01T00:00:00Z")

    response = api.delete(f"/api/batches/{batch_id}/")

    assert response.status_code == 409
    assert Batch.objects.get(pk=batch_id).status == "completed"


def test_a_requester_never_sees_or_cancels_anothers_batch(api, builtins):
    batch_id = api.post("/api/batches/", {"jobs": specs(2)}, format="json").json()["id"]
    bob = client_for("bob")

    assert bob.get(f"/api/batches/{batch_id}/").status_code == 404
    assert bob.delete(f"/api/batches/{batch_id}/").status_code == 404
    assert bob.get("/api/batches/").json()["count"] == 0
    assert Batch.objects.get(pk=batch_id).status == "pending"
    assert set(CrawlJob.objects.filter(batch_id=batch_id).values_list("status", flat=True)) == {"queued"}
    assert client_for("root", admin=True).get(f"/api/batches/{batch_id}/").status_code == 200


def test_batches_need_a_token():
    assert APIClient().post("/api/batches/", {"jobs": specs(1)}, format="json").status_code in (401, 403)
