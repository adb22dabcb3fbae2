"""Packaged versions through a real worker that is never restarted: upload, build, canary, two dependency versions
side by side, deprecation, a failed build, a corrupt upload; a packaged crawl cancelled and timed out; a failing
packaged canary rolled back."""

from __future__ import annotations

import io

import pytest

from items.models import Item
from registry.models import Package, ScraperVersion, StoredFile
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.e2e.packages_stack import (
    SPIDER,
    VERSIONS,
    built,
    crawl,
    ok,
    outputs,
    package_dirs,
    package_worker,
    shop_site,
    upload,
    wait_for,
)
from tests.packages import shop_wheel

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["package_dirs", "package_worker", "shop_site"]  # fixtures


def test_packaged_versions_roll_out_and_back_on_a_running_worker(package_worker, package_dirs, shop_site, api):
    site = shop_site
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    pool = package_worker.pool_pids()
    src = package_dirs["src"]

    # v1: uploaded, built by the worker, crawled.
    v1 = ok(upload(ops, shop_wheel(src, version="1.0.0", output="v1", dep="1.0"), "1.0.0", is_default="true"), 201)
    assert v1["package_status"] == "building"
    assert built(ops, "1.0.0", package_worker)["package_status"] == "ready"
    assert [outputs(job) for job in crawl(api, site, [1], package_worker)] == [("1.0.0", "succeeded", "v1", "dep-1.0")]

    # v2: the same module name, other output, the other version of the dependency, as a 50% canary.
    wheel2 = shop_wheel(src, version="2.0.0", output="v2", dep="2.0")
    ok(upload(ops, wheel2, "2.0.0", variant="canary", traffic_pct="50"), 201)
    assert built(ops, "2.0.0", package_worker)["package_status"] == "ready"
    split = [outputs(job) for job in crawl(api, site, range(2, 18), package_worker)]
    # Each job ran one version's code with that version's dependency, in the same worker process.
    assert set(split) == {("1.0.0", "succeeded", "v1", "dep-1.0"), ("2.0.0", "succeeded", "v2", "dep-2.0")}
    assert package_worker.pool_pids() == pool, "no worker process was restarted"

    # A build that cannot succeed (its dependency is nowhere) marks the version failed, and routing skips it.
    broken = ok(upload(ops, shop_wheel(src, version="3.0.0", output="v3", dep="9.0"), "3.0.0", variant="beta"), 201)
    assert broken["package_status"] == "building"
    failed = built(ops, "3.0.0", package_worker)
    assert failed["package_status"] == "failed"
    assert "trawltestdep==9.0" in failed["package_log"]
    ok(ops.put("/api/scrapers/pshop/traffic/", {"2.0.0": 50, "3.0.0": 50}, format="json"))
    assert {outputs(job)[0] for job in crawl(api, site, range(18, 24), package_worker)} <= {"1.0.0", "2.0.0"}
    ok(ops.put("/api/scrapers/pshop/traffic/", {"2.0.0": 50}, format="json"))

    # Deprecating v2 sends everything back to v1, and its environment leaves the machine once its child is gone.
    sha2 = ScraperVersion.objects.get(scraper__name="pshop", version="2.0.0").package.sha256
    assert (package_dirs["envs"] / sha2).is_dir()
    ok(ops.post(f"{VERSIONS}2.0.0/deprecate/"))
    after = [outputs(job) for job in crawl(api, site, range(24, 30), package_worker)]
    assert set(after) == {("1.0.0", "succeeded", "v1", "dep-1.0")}
    wait_for(
        lambda: not (package_dirs["envs"] / sha2).exists(), timeout=60, what="v2 env pruned", worker=package_worker
    )
    sha1 = ScraperVersion.objects.get(scraper__name="pshop", version="1.0.0").package.sha256
    assert (package_dirs["envs"] / sha1).is_dir(), "the version still in use keeps its environment"

    # A corrupt upload is refused and changes nothing.
    before = (ok(ops.get(VERSIONS)), Package.objects.count(), StoredFile.objects.count())
    corrupt = wheel2.read_bytes()[:200]
    handle = io.BytesIO(corrupt)
    handle.name = "trawlshop-4.0.0-py3-none-any.whl"
    refused = ops.post(
        VERSIONS, {"version": "4.0.0", "variant": "canary", "spider": SPIDER, "package": handle}, format="multipart"
    )
    assert refused.status_code == 400 and list(refused.json()) == ["package"]
    after_refusal = (
        ok(ops.get(VERSIONS)),
        Package.objects.count(),
        StoredFile.objects.count(),
    )
    assert after_refusal == before


def test_a_packaged_crawl_is_cancelled_and_timed_out_like_any_other(package_worker, package_dirs, shop_site, api):
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    wheel = shop_wheel(package_dirs["src"], version="1.0.0", output="v1")
    follow = "trawlshop.spiders.FollowSpider"
    ok(upload(ops, wheel, "1.0.0", spider=follow, is_default="true"), 201)
    # The same wheel again, with a short timeout: one stored package, one environment.
    ok(upload(ops, wheel, "1.0.1", spider=follow, settings='{"TRAWL_JOB_TIMEOUT": 3}'), 201)
    for version in ("1.0.0", "1.0.1"):
        body = built(ops, version, package_worker)
        assert body["package_status"] == "ready", body["package_log"]
    assert Package.objects.count() == 1

    endless = {"url": f"{shop_site.url}/slow/0", "scraper": "pshop"}
    cancelled = ok(api.post("/api/jobs/", {**endless, "version": "1.0.0"}, format="json"), 201)["id"]
    wait_for(lambda: shop_site.slow_hits() >= 3, timeout=60, what="the crawl running", worker=package_worker)
    ok(api.post(f"/api/jobs/{cancelled}/cancel/"), 202)
    job = wait_for_job(cancelled, timeout=60)
    hits = shop_site.slow_hits()
    timed_out = wait_for_job(ok(api.post("/api/jobs/", {**endless, "version": "1.0.1"}, format="json"), 201)["id"])

    assert (job.status, job.error_class) == ("cancelled", "cancelled")
    assert job.stats["items"] >= 3, "items found before the cancel were kept"
    assert (timed_out.status, timed_out.error_class) == ("failed", "timeout")
    assert timed_out.stats["pages"] >= 1
    # The child really stopped crawling: hits since the cancel are the timed-out job's only.
    assert shop_site.slow_hits() - hits <= timed_out.stats["requests"] + 1
    # And the package still serves the next job.
    after = crawl(api, shop_site, [1], package_worker)
    assert [j.status for j in after] == ["succeeded"]
    assert {item.data["output"] for item in Item.objects.filter(last_job=after[0])} == {"v1"}
    # The child's log records are in the job's log, as an in-process crawl's are.
    log = api.get(f"/api/jobs/{after[0].pk}/log/").content.decode()
    assert " INFO trawl.package.scrapy.core.engine Spider opened" in log, log
    assert f" INFO trawl.package.packaged_follow packaged v1 parsed {shop_site.url}/product-1.html" in log, log


def test_a_failing_packaged_canary_is_rolled_back_and_compared(package_worker, package_dirs, shop_site, api):
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop", "settings": {"TRAWL_ROLLBACK_MIN_JOBS": 2}}, format="json"), 201)
    src = package_dirs["src"]
    ok(upload(ops, shop_wheel(src, version="1.0.0", output="v1"), "1.0.0", is_default="true"), 201)
    raising = "trawlshop.spiders.RaisingSpider"
    wheel2 = shop_wheel(src, version="2.0.0", output="v2")
    ok(upload(ops, wheel2, "2.0.0", spider=raising, variant="canary", traffic_pct="100"), 201)
    for version in ("1.0.0", "2.0.0"):
        assert built(ops, version, package_worker)["package_status"] == "ready"

    canary = crawl(api, shop_site, [1, 2], package_worker)
    wait_for(
        lambda: ok(ops.get(f"{VERSIONS}2.0.0/"))["state"] == "rolled back",
        timeout=10,
        what="the canary rolled back",
        worker=package_worker,
    )
    stable = crawl(api, shop_site, [3, 4], package_worker)

    assert [(j.version.version, j.status, j.error_class) for j in canary] == [("2.0.0", "failed", "spider_error")] * 2
    assert "v2 cannot parse" in canary[0].error_message
    assert [outputs(job) for job in stable] == [("1.0.0", "succeeded", "v1", None)] * 2
    rows = {row["version"]: row for row in ok(ops.get("/api/scrapers/pshop/compare/?window=1h"))}
    assert (rows["2.0.0"]["jobs"], rows["2.0.0"]["success_rate"], rows["2.0.0"]["error_classes"]) == (
        2,
        0.0,
        {"spider_error": 2},
    )
    assert (rows["1.0.0"]["jobs"], rows["1.0.0"]["success_rate"], rows["1.0.0"]["items_per_job"]) == (2, 1.0, 1.0)
