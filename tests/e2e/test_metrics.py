"""`/metrics` and `/api/stats/` move when a real worker runs a real crawl."""

from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SUCCEEDED = ("trawl_jobs_finished_total", (("status", "succeeded"),))
DOMAIN_PAGES = ("trawl_domain_pages_total", (("domain", "127.0.0.1"),))
DOMAIN_OK = ("trawl_domain_responses_total", (("code", "200"), ("domain", "127.0.0.1")))
LINK = (("scraper", "link"), ("version", "1.0.0"))
DURATIONS = ("trawl_job_duration_seconds_count", LINK)
ITEMS_NEW = ("trawl_version_items_total", (("change", "new"), *LINK))


def scrape(client, auth: str) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=auth)
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_metrics_move_when_a_job_runs(client, api, admin_api, admin_auth, builtins, site, job_waiter):
    before = scrape(client, admin_auth)
    stats_before = api.get("/api/stats/").json()

    job = api.post("/api/jobs/", {"url": f"{site.url}/product-3.html"}, format="json").json()
    finished = job_waiter(job["id"])
    # Counters are a follow-up of the job's end, written by the worker just after the job's row says succeeded, in one
    # pipeline that is not a transaction: a scrape may fall between its first and its last command.
    deadline = time.monotonic() + 30

    def moved(after: dict) -> bool:
        return all(after.get(name, 0) >= before.get(name, 0) + 1 for name in (SUCCEEDED, DURATIONS))

    while not moved(after := scrape(client, admin_auth)):
        assert time.monotonic() < deadline, "counters not written within 30 s of the job's end"
        time.sleep(0.2)
    stats_after = api.get("/api/stats/").json()

    assert finished.status == "succeeded", finished.error_message
    pages = finished.stats["pages"]
    assert pages >= 1
    assert after[SUCCEEDED] == before.get(SUCCEEDED, 0) + 1
    assert after[DOMAIN_PAGES] == before.get(DOMAIN_PAGES, 0) + pages
    assert after[DOMAIN_OK] == before.get(DOMAIN_OK, 0) + finished.stats["status_codes"]["200"]
    assert after[DURATIONS] == before.get(DURATIONS, 0) + 1
    assert after[ITEMS_NEW] == before.get(ITEMS_NEW, 0) + finished.stats["items_new"]

    def window(body, window):
        return body["domains"].get("127.0.0.1", {}).get(window, {"pages": 0, "jobs": {"succeeded": 0}})

    lifetime_before, lifetime_after = window(stats_before, "lifetime"), window(stats_after, "lifetime")
    assert lifetime_after["pages"] == lifetime_before["pages"] + pages
    assert lifetime_after["jobs"]["succeeded"] == lifetime_before["jobs"]["succeeded"] + 1
    # A rolling window also drops minutes between the two reads (earlier tests' jobs), so only its lower bound is exact.
    assert window(stats_after, "900")["pages"] >= pages
    assert window(stats_after, "900")["jobs"]["succeeded"] >= 1
    workers = admin_api.get("/api/stats/").json()["workers"]
    assert any(worker["hostname"] == finished.worker.rsplit("/", 1)[0] for worker in workers)


def test_stats_can_ask_the_workers_now(admin_api, crawl_worker):
    workers = admin_api.get("/api/stats/?refresh_workers=1").json()["workers"]

    answered = [worker for worker in workers if worker["online"]]
    assert answered, workers
    assert all(worker["active_tasks"] is not None for worker in answered)
