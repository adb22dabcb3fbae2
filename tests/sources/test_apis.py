"""`/api/sources/` and the source admin: who may manage sources, what is refused, crawl now, filters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from crawls.models import CrawlJob, JobStatus
from sources.models import Source
from tests.clients import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(builtins):
    return client_for("ops", admin=True)


@pytest.fixture
def published(sent_tasks):
    """Work the API queued is recorded: unit tests never reach the broker."""
    return sent_tasks


def create(ops, **spec):
    response = ops.post("/api/sources/", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_only_admin_tokens_manage_sources(api, builtins):
    assert api.get("/api/sources/").status_code == 403
    assert api.post("/api/sources/", {"url": "http://shop.test/"}, format="json").status_code == 403
    assert APIClient().get("/api/sources/").status_code in (401, 403)


def test_create_read_list_and_delete(ops):
    body = create(ops, url="http://shop.test/cat/1", kind="list", scraper="selectors", priority=70, config={"a": 1})

    assert body | {"id": 0, "next_sync_at": None, "created_at": None, "updated_at": None} == {
        "id": 0,
        "url": "http://shop.test/cat/1",
        "kind": "list",
        "strategy": "deep",
        "scraper": "selectors",
        "priority": 70,
        "enabled": True,
        "next_sync_at": None,
        "schedule_note": "",
        "refresh_interval": 3600,
        "min_interval": 600,
        "max_interval": 86400,
        "current_interval": 3600,
        "consecutive_failures": 0,
        "window_start_hour": None,
        "window_end_hour": None,
        "timezone": "UTC",
        "cron": "",
        "config": {"a": 1},
        "args": {},
        "last_run_at": None,
        "last_stats": {},
        "parent": None,
        "created_at": None,
        "updated_at": None,
    }
    assert ops.get(f"/api/sources/{body['id']}/").json()["url"] == "http://shop.test/cat/1"
    assert [s["id"] for s in ops.get("/api/sources/").json()["results"]] == [body["id"]]
    assert ops.delete(f"/api/sources/{body['id']}/").status_code == 204
    assert not Source.objects.exists()


def test_a_sitemap_source_defaults_to_the_sitemap_scraper(ops):
    body = create(ops, url="http://shop.test/sitemap.xml", kind="sitemap")

    assert (body["scraper"], body["strategy"]) == ("sitemap", "discovery")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"url": "http://shop.test/", "window_start_hour": 22}, "window_end_hour"),
        ({"url": "http://shop.test/", "window_start_hour": 24, "window_end_hour": 6}, "window_start_hour"),
        ({"url": "http://shop.test/", "timezone": "Moon/Base"}, "timezone"),
        ({"url": "http://shop.test/", "scraper": "nope"}, "scraper"),
        ({"url": "http://shop.test/", "kind": "blog"}, "kind"),
        ({"url": "http://shop.test/", "refresh_interval": 100, "min_interval": 600}, "refresh_interval"),
        ({"url": "http://shop.test/", "colour": "red"}, "colour"),
        ({"url": "mailto:x@shop.test"}, "url"),
    ],
)
def test_bad_input_is_refused_naming_the_field(ops, spec, field):
    response = ops.post("/api/sources/", spec, format="json")

    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Source.objects.exists()


def test_patch_changes_some_fields_and_checks_the_result(ops):
    body = create(ops, url="http://shop.test/", refresh_interval=3600)

    night = ops.patch(
        f"/api/sources/{body['id']}/",
        {"window_start_hour": 22, "window_end_hour": 6, "timezone": "Europe/Paris", "refresh_interval": 7200},
        format="json",
    )
    half = ops.patch(f"/api/sources/{body['id']}/", {"window_start_hour": None}, format="json")

    assert night.status_code == 200
    assert {k: night.json()[k] for k in ("window_start_hour", "window_end_hour", "timezone", "current_interval")} == {
        "window_start_hour": 22,
        "window_end_hour": 6,
        "timezone": "Europe/Paris",
        "current_interval": 7200,
    }
    assert half.status_code == 400 and "window_end_hour" in half.json()
    assert ops.patch(f"/api/sources/{body['id']}/", {}, format="json").status_code == 400
    assert ops.put(f"/api/sources/{body['id']}/", {"url": "http://x.test/"}, format="json").status_code == 405


def test_crawl_now_answers_202_with_the_job_and_409_while_it_is_active(ops, published):
    body = create(ops, url="http://shop.test/", priority=80)

    first = ops.post(f"/api/sources/{body['id']}/crawl/")
    again = ops.post(f"/api/sources/{body['id']}/crawl/")

    assert first.status_code == 202
    job = first.json()
    assert (job["source"], job["priority"], job["status"]) == (body["id"], 80, "queued")
    assert again.status_code == 409
    CrawlJob.objects.filter(pk=job["id"]).update(status=JobStatus.SUCCEEDED)
    assert ops.post(f"/api/sources/{body['id']}/crawl/").status_code == 202


def test_list_filters(ops):
    hub = create(ops, url="http://shop.test/", kind="hub", strategy="discovery")
    later = create(ops, url="http://shop.test/cat/1", next_sync_at=(timezone.now() + timedelta(hours=1)).isoformat())
    create(ops, url="http://shop.test/off", enabled=False)
    Source.objects.filter(pk=later["id"]).update(parent_id=hub["id"])

    def ids(query: str) -> set[int]:
        return {s["id"] for s in ops.get(f"/api/sources/?{query}").json()["results"]}

    assert ids("kind=hub") == {hub["id"]}
    assert ids("due=true") == {hub["id"]}
    assert len(ids("enabled=false")) == 1
    assert ids(f"parent={hub['id']}") == {later["id"]}
    assert len(ids("scraper=link")) == 3
    assert ops.get("/api/sources/?parent=hub").status_code == 400


# --- Admin -------------------------------------------------------------------------------------


@pytest.fixture
def staff(client, builtins):
    user = get_user_model().objects.create_superuser("root", "root@localhost", "pw")
    client.force_login(user)
    return client


def test_admin_lists_sources_with_their_next_run_and_filters(staff, ops):
    create(ops, url="http://shop.test/", kind="hub", strategy="discovery")
    create(ops, url="http://shop.test/later", next_sync_at=(timezone.now() + timedelta(hours=3)).isoformat())

    page = staff.get("/admin/sources/source/")
    due = staff.get("/admin/sources/source/?due=now&status=healthy&kind__exact=hub")

    assert page.status_code == 200
    assert b"due now" in page.content and b"in 2\xc2\xa0hours" in page.content
    assert due.status_code == 200 and b"http://shop.test/later" not in due.content


def test_admin_crawl_now_action_queues_jobs_and_warns_for_busy_sources(staff, ops, published):
    source = create(ops, url="http://shop.test/")
    action = {"action": "crawl_now", "_selected_action": [source["id"]]}

    staff.post("/admin/sources/source/", action)
    busy = staff.post("/admin/sources/source/", action, follow=True)

    assert CrawlJob.objects.filter(source_id=source["id"]).count() == 1
    assert b"a source runs one job at a time" in busy.content


def test_admin_form_refuses_half_a_window(staff, ops):
    source = Source.objects.get(pk=create(ops, url="http://shop.test/")["id"])
    form = {
        "scraper": source.scraper_id,
        "url": source.url,
        "kind": "list",
        "strategy": "deep",
        "priority": 50,
        "refresh_interval": 3600,
        "min_interval": 600,
        "max_interval": 86400,
        "config": "{}",
        "enabled": "on",
        "window_start_hour": 22,
        "window_end_hour": "",
        "timezone": "UTC",
        "next_sync_at_0": "2026-01-01",
        "next_sync_at_1": "00:00:00",
    }

    refused = staff.post(f"/admin/sources/source/{source.pk}/change/", form)
    saved = staff.post(f"/admin/sources/source/{source.pk}/change/", {**form, "window_end_hour": 6})

    assert refused.status_code == 200 and b"needs both" in refused.content
    assert saved.status_code == 302
    source.refresh_from_db()
    assert (source.window_start_hour, source.window_end_hour) == (22, 6)
