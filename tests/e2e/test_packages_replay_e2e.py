"""Record, replay and error pages of a packaged version (an uploaded wheel, crawling in its worker's child process),
with a real worker: the child's recording reaches the job's stored WARC through its channel, the same version
replays it clean in its own environment with no network, and a response its spider raised on is kept and linked."""

from __future__ import annotations

import time

import pytest

from crawls.models import JobRecording
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.e2e.packages_stack import built, ok, package_dirs, package_worker, shop_site, upload
from tests.packages import shop_wheel

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["package_dirs", "package_worker", "shop_site"]  # fixtures
PAGES = 8 + 40  # the catalogue's list pages and products, each one item of the packaged ShopSpider


def replayed(api, job_id: str, version: str, worker, *, timeout: float = 180) -> dict:
    asked = ok(api.post(f"/api/jobs/{job_id}/replay/", {"version": version}, format="json"), 202)
    deadline = time.monotonic() + timeout
    while True:
        (found,) = [r for r in api.get(f"/api/jobs/{job_id}/replays/").json() if r["id"] == asked["id"]]
        if found["status"] not in ("queued", "running"):
            return found
        assert time.monotonic() < deadline, f"{found}\n--- worker log ---\n{worker.log_tail()}"
        time.sleep(0.3)


def test_a_recorded_packaged_job_replays_clean_offline_and_its_error_pages_are_kept(
    package_dirs, package_worker, shop_site, api
):
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    ok(upload(ops, shop_wheel(package_dirs["src"], version="1.0.0", output="v1"), "1.0.0", is_default="true"), 201)
    raising = shop_wheel(package_dirs["src"], version="1.0.1", output="v1-raising")
    ok(upload(ops, raising, "1.0.1", spider="trawlshop.spiders.RaisingSpider"), 201)
    assert built(ops, "1.0.0", package_worker)["package_status"] == "ready"
    assert built(ops, "1.0.1", package_worker)["package_status"] == "ready"

    body = {"url": f"{shop_site.url}/list-1.html", "scraper": "pshop", "options": {"record": True}}
    job = wait_for_job(ok(api.post("/api/jobs/", body, format="json"), 201)["id"], timeout=180)
    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{package_worker.log_tail()}"
    (recording,) = JobRecording.objects.filter(job=job)
    hits = sum(shop_site.hits.values())
    replay = replayed(api, str(job.pk), "1.0.0", package_worker)

    assert job.stats["pages"] == PAGES and job.version.package_id
    assert recording.responses >= PAGES and len(recording.items) == PAGES and not recording.truncated
    assert sum(shop_site.hits.values()) == hits, "the replay reached the site"
    assert replay["status"] == "clean", (replay["error"], replay["report"])
    report = replay["report"]
    assert (report["pages"], report["network"], report["recorded"], report["replayed"]) == (PAGES, [], PAGES, PAGES)

    body = {"url": f"{shop_site.url}/product-3.html", "scraper": "pshop", "version": "1.0.1"}
    failed = wait_for_job(ok(api.post("/api/jobs/", body, format="json"), 201)["id"], timeout=180)
    (kept,) = api.get(f"/api/jobs/{failed.pk}/error-pages/").json()
    (record,) = api.get(f"/api/jobs/{failed.pk}/log/", {"q": "kept the response"}).content.decode().splitlines()
    sent = (shop_site.root / "product-3.html").read_bytes()

    assert (failed.status, failed.error_class) == ("failed", "spider_error"), failed.error_message
    assert (kept["url"], kept["status"], kept["size"]) == (f"{shop_site.url}/product-3.html", 200, len(sent))
    assert kept["error"] == f"ValueError: v1-raising cannot parse {shop_site.url}/product-3.html"
    assert api.get(kept["body_url"]).content == sent
    assert record.endswith(f"/api/jobs/{failed.pk}/error-pages/{kept['number']}/")


def test_a_packaged_crawls_max_pages_is_counted_in_its_jobs_frontier(package_dirs, package_worker, shop_site, api):
    """The child's budget counts in the job's frontier, with the child's own Redis user (runtime.watch.budget)."""
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    ok(upload(ops, shop_wheel(package_dirs["src"], version="1.0.0", output="v1"), "1.0.0", is_default="true"), 201)
    assert built(ops, "1.0.0", package_worker)["package_status"] == "ready"
    shop_site.hits.clear()

    body = {"url": f"{shop_site.url}/list-1.html", "scraper": "pshop", "options": {"max_pages": 3}}
    job = wait_for_job(ok(api.post("/api/jobs/", body, format="json"), 201)["id"], timeout=180)

    assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{package_worker.log_tail()}"
    assert job.stats["closed_by"] == "max_pages"
    assert sum(count for path, count in shop_site.hits.items() if path != "/robots.txt") <= 3, shop_site.hits
