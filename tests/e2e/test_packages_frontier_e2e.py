"""Packaged versions on the job's frontier, with real workers: a packaged crawl in two parallel shards (two
children, one seen-set), and a packaged crawl handed over by its SIGTERMed worker."""

from __future__ import annotations

import pytest

from items.models import Item
from tests.callbacks.harness import running_alone
from tests.clients import client_for
from tests.conftest import wait_for_job
from tests.e2e.frontier_stack import SLOW_REAPER, TreeSite, _cluster, crawl_handed_over
from tests.e2e.packages_stack import built, ok, package_dirs, package_env, upload, worker_for_packages
from tests.packages import shop_wheel
from throttling.services import throttle_create

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
__all__ = ["package_dirs"]  # a fixture


def test_a_packaged_crawl_runs_from_the_job_s_frontier_in_parallel_shards(
    package_dirs, redis_server, throttle_keys_clean, tmp_path, api
):
    """The child process's crawl uses the job's frontier in Redis: two shards, two children, every page once. Starts
    from clean throttle keys: an earlier test's adaptive state for 127.0.0.1 would otherwise slow this crawl."""
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    wheel = shop_wheel(package_dirs["src"], version="1.0.0", output="v1")
    site = TreeSite(pages=255, delay=0.2)  # slow enough that the second shard joins while there is work left
    try:
        # Started first: the build task must go to this worker, not to one without the package directories.
        with running_alone(worker_for_packages(package_dirs, tmp_path, concurrency=2)) as worker:
            ok(upload(ops, wheel, "1.0.0", spider="trawlshop.spiders.FollowSpider", is_default="true"), 201)
            assert built(ops, "1.0.0", worker)["package_status"] == "ready"
            body = {"url": f"{site.url}/p/0", "scraper": "pshop", "parallelism": 2}
            job_id = ok(api.post("/api/jobs/", body, format="json"), 201)["id"]
            job = wait_for_job(job_id, timeout=120, log=lambda: worker.log_tail(200))
            assert job.status == "succeeded", f"{job.error_class}: {job.error_message}\n{worker.log_tail()}"
    finally:
        site.server.shutdown()

    hits = site.page_hits()
    assert set(hits) == site.all_paths()
    assert [path for path, count in hits.items() if count > 1] == []  # the two children shared one seen-set
    assert Item.objects.filter(url__startswith=f"{site.url}/p/").count() == site.pages
    assert job.stats["items"] == site.pages
    assert job.stats["shards"] == 2
    assert all(pages > 0 for pages in job.stats["pages_by_shard"].values()), job.stats["pages_by_shard"]
    assert len(job.stats["pages_by_shard"]) == 2


@pytest.fixture
def package_cluster(package_dirs, django_db_setup, django_db_blocker, redis_server, tmp_path):
    yield from _cluster(tmp_path, {**SLOW_REAPER, **package_env(package_dirs)})


def test_a_packaged_crawl_whose_worker_gets_sigterm_continues_on_another_worker(
    package_dirs, package_cluster, throttle_keys_clean, api
):
    """SIGTERM to the crawling worker's whole process group, its package child included: the child keeps crawling
    until its worker hands the crawl back, and another worker's child continues it from the frontier."""
    ops = client_for("ops", admin=True)
    ok(ops.post("/api/scrapers/", {"name": "pshop"}, format="json"), 201)
    wheel = shop_wheel(package_dirs["src"], version="1.0.0", output="v1")
    ok(upload(ops, wheel, "1.0.0", spider="trawlshop.spiders.FollowSpider", is_default="true"), 201)
    assert built(ops, "1.0.0", package_cluster.ops)["package_status"] == "ready"
    throttle_create(domain="127.0.0.1", rate=50, burst=50, ip_rate=50, ip_burst=50)
    site = TreeSite(pages=63, delay=0.25)
    try:
        crawl_handed_over(api, site, package_cluster, whole_group=True, scraper="pshop")
    finally:
        site.server.shutdown()
    assert {item.data["output"] for item in Item.objects.filter(url__startswith=f"{site.url}/p/")} == {"v1"}
