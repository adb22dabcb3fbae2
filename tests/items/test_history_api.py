"""The history's API edges: watches checked as hostile input, a source's volatile-field overrides, job diffs
only between comparable jobs one may see."""

from __future__ import annotations

import pytest

from crawls.models import CrawlJob
from items.models import ChangeWatch, ItemSighting
from registry.models import Scraper
from sources.models import Source
from tests.items.upserts import job_items_upsert

pytestmark = pytest.mark.django_db


@pytest.fixture
def source(db):
    return Source.objects.create(url="http://shop.test/list", scraper=Scraper.objects.create(name="shop"))


def test_a_watch_is_checked_and_only_admins_name_a_source(api, admin_api, source):
    hook = "http://hook.test/x"
    bad = api.post(
        "/api/item-watches/", {"target_url": hook, "rules": [{"field": "p", "drop_pct": 500}]}, format="json"
    )
    assert bad.status_code == 400 and "rules" in bad.json()
    body = {"target_url": hook, "rules": [{"field": "price"}], "source": source.pk}
    assert api.post("/api/item-watches/", body, format="json").status_code == 400
    assert admin_api.post("/api/item-watches/", body, format="json").status_code == 201
    del body["source"]
    created = api.post("/api/item-watches/", body, format="json")
    assert created.status_code == 201, created.content
    assert [w["id"] for w in api.get("/api/item-watches/").json()["results"]] == [created.json()["id"]]
    assert api.delete(f"/api/item-watches/{created.json()['id']}/").status_code == 204
    assert ChangeWatch.objects.count() == 1  # the admin's


def test_volatile_field_overrides_apply_to_the_next_run(admin_api, api, source):
    url = f"/api/sources/{source.pk}/volatile-fields/"
    assert api.get(url).status_code == 403
    response = admin_api.put(url, {"always": ["views"], "never": []}, format="json")
    assert response.status_code == 200 and response.json()["effective"] == ["views"]
    jobs = []
    for views in (1, 2):
        jobs.append(CrawlJob.objects.create(url=source.url, scraper=source.scraper, source=source))
        job_items_upsert(job=jobs[-1], items=[{"url": "u1", "views": views}])
    assert ItemSighting.objects.get(job=jobs[-1]).change == "unchanged"
    assert admin_api.get(f"/api/jobs/{jobs[0].pk}/diff/{jobs[1].pk}/").json()["changed"] == []
    with_volatile = admin_api.get(f"/api/jobs/{jobs[0].pk}/diff/{jobs[1].pk}/?volatile=true").json()
    assert with_volatile["changed"][0]["fields"] == [{"field": "views", "kind": "changed", "old": 1, "new": 2}]


def test_a_diff_needs_two_comparable_jobs_you_can_see(api, requester, admin_api, source):
    mine = [CrawlJob.objects.create(url="http://shop.test/", scraper=source.scraper, requester=requester) for _ in "ab"]
    other_source = Source.objects.create(url="http://shop.test/other", scraper=source.scraper)
    theirs = CrawlJob.objects.create(url=source.url, scraper=source.scraper, source=source)
    assert api.get(f"/api/jobs/{mine[0].pk}/diff/{mine[1].pk}/").status_code == 200
    assert api.get(f"/api/jobs/{mine[0].pk}/diff/{theirs.pk}/").status_code == 404
    elsewhere = CrawlJob.objects.create(url=source.url, scraper=source.scraper, source=other_source)
    refused = admin_api.get(f"/api/jobs/{theirs.pk}/diff/{elsewhere.pk}/")
    assert refused.status_code == 400 and "b" in refused.json()
