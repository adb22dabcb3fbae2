"""A real worker process runs real crawls of a local site, driven through the REST API."""

from __future__ import annotations

import time

import pytest

from crawls.models import CrawlJob
from items.models import Item
from registry.models import Scraper, ScraperVersion

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CATALOGUE_CONFIG = {
    "item_links": "a.product",
    "next_page": "a.next",
    "fields": {"title": "h1::text", "price": ".price::text", "image": "img::attr(src)"},
}


def submit(api, **spec):
    response = api.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_rest_job_succeeds_with_expected_items(api, builtins, site, job_waiter):
    job = submit(api, url=f"{site.url}/list-1.html", scraper="selectors", options={"config": CATALOGUE_CONFIG})

    finished = job_waiter(job["id"])

    assert finished.status == "succeeded", finished.error_message
    detail = api.get(f"/api/jobs/{job['id']}/").json()
    assert detail["version"] == "1.0.0"
    assert detail["stats"]["items_new"] == 12
    assert detail["stats"]["status_codes"] == {"200": 15}
    assert detail["stats"]["finish_reason"] == "finished"
    items = api.get(f"/api/jobs/{job['id']}/items/?limit=100").json()
    assert items["count"] == 12
    first = min(items["results"], key=lambda row: int(row["data"]["title"].split()[-1]))
    assert first["data"] == {
        "title": "Product 1",
        "price": "11.00",
        "image": f"{site.url}/img/1.png",
        "url": f"{site.url}/product-1.html",
    }
    assert first["change"] == "new"


def test_recrawl_of_unchanged_pages_counts_unchanged(api, builtins, site, job_waiter):
    spec = {"url": f"{site.url}/list-1.html", "scraper": "selectors", "options": {"config": CATALOGUE_CONFIG}}
    first = job_waiter(submit(api, **spec)["id"])
    second = job_waiter(submit(api, **spec)["id"])

    assert first.stats["items_new"] == 12
    assert (second.stats["items_new"], second.stats["items_changed"], second.stats["items_unchanged"]) == (0, 0, 12)
    assert Item.objects.count() == 12


def test_ten_jobs_in_a_row_reuse_one_worker_process(api, builtins, site, job_waiter):
    ids = [submit(api, url=f"{site.url}/product-{n}.html")["id"] for n in range(1, 11)]

    jobs = [job_waiter(job_id) for job_id in ids]

    assert [job.status for job in jobs] == ["succeeded"] * 10
    assert len({job.worker for job in jobs}) == 1, "every job should run in the same pool process"


def test_spider_that_raises_fails_the_job_and_worker_keeps_serving(api, builtins, site, job_waiter):
    scraper = Scraper.objects.create(name="broken")
    ScraperVersion.objects.create(
        scraper=scraper, version="0.1.0", spider="tests.fixtures.spiders.RaisingSpider", is_default=True
    )

    failed = job_waiter(submit(api, url=f"{site.url}/product-1.html", scraper="broken")["id"])
    after = job_waiter(submit(api, url=f"{site.url}/product-2.html")["id"])

    assert (failed.status, failed.error_class) == ("failed", "spider_error")
    assert "selector drifted" in failed.error_message
    assert after.status == "succeeded"
    assert after.worker == failed.worker


def test_job_past_its_timeout_fails_and_its_crawl_stops(api, builtins, site, job_waiter):
    link = ScraperVersion.objects.get(scraper__name="link")
    # The timeout counts from the claim, so it includes the crawl's start; a chain of 20 pages of 0.5 s, one at a
    # time, outlasts it however fast the start.
    link.settings = {"TRAWL_JOB_TIMEOUT": 8, "CONCURRENT_REQUESTS": 1}
    link.save()

    delay, site.slow_delay = site.slow_delay, 0.5
    try:
        job = job_waiter(submit(api, url=f"{site.url}/slow/0", options={"maxdepth": 20})["id"])
    finally:
        site.slow_delay = delay
    hits_at_end = site.slow_hits()
    time.sleep(3)

    assert (job.status, job.error_class) == ("failed", "timeout")
    assert job.duration < 30
    assert site.slow_hits() <= hits_at_end + 1, "the crawl kept fetching after its job ended"
    assert job.stats["pages"] >= 2


def test_running_job_can_be_cancelled(api, builtins, site, job_waiter):
    job = submit(api, url=f"{site.url}/slow/0", options={"maxdepth": 20})
    job_waiter(job["id"], statuses=("running",))
    time.sleep(1)

    response = api.post(f"/api/jobs/{job['id']}/cancel/")
    finished = job_waiter(job["id"])

    assert response.status_code == 202
    assert (finished.status, finished.error_class) == ("cancelled", "cancelled")
    assert CrawlJob.objects.get(pk=job["id"]).finished_at is not None


def test_link_crawl_of_an_unchanged_site_is_all_unchanged_the_second_time(api, builtins, site, job_waiter):
    spec = {"url": f"{site.url}/index.html", "options": {"maxdepth": 3}}
    first = job_waiter(submit(api, **spec)["id"])
    second = job_waiter(submit(api, **spec)["id"])

    assert first.stats["items_new"] == first.stats["items"] > 10
    assert second.stats["items_unchanged"] == second.stats["items"] == first.stats["items"]
