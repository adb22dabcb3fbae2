"""Rendered crawls end to end: real `celery worker` processes, Debian's Chromium, local sites.

- A listing whose product links a script inserts: the `link` scraper finds the products only with `render: true`.
- Two requesters' rendered jobs on one worker process: a cookie one job's page set never reaches the other's pages.
- A cancelled rendered crawl leaves no Chromium process (read from the process table).
- A SIGKILLed pool process takes its Chromium with it, and the crawl resumes from its frontier on attempt 2.

The first three share the session's crawl worker (the settings `make run` ships); the guard's side of rendering is in
tests/security/test_render_guard.py.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from rest_framework.test import APIClient

from items.models import Item
from tests.e2e.test_frontier import (
    FAST_REAPER,
    TreeSite,
    _cluster,
    fast_throttle,  # noqa: F401 (a fixture)
    in_flight_paths,
    wait_job,
)
from tests.security.hostile_site import HostileSite, submit

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PRODUCTS = 3
LISTING = f"""<html><head><title>Shop</title></head><body><div id="products"></div><script>
for (let n = 1; n <= {PRODUCTS}; n++) {{
  const link = document.createElement("a");
  link.className = "product"; link.href = "/product/" + n; link.textContent = "Product " + n;
  document.getElementById("products").appendChild(link);
}}
</script></body></html>"""
COOKIE_SETTER = """<html><head><title>set</title></head><body>
<script>document.cookie = "secret=alice-7f3a; path=/";</script><a href="/show">show</a></body></html>"""
COOKIE_SHOWER = """<html><head><title>show</title></head><body>
<script>document.title = "cookies:" + document.cookie;</script></body></html>"""
GONE_WITHIN = 30  # seconds a test waits for Chromium to exit before failing


@pytest.fixture
def cluster(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """Two crawl workers, an ops worker and beat (the reaper requeues a killed crawl): tests/e2e/test_frontier.py."""
    yield from _cluster(tmp_path, FAST_REAPER)


def shop_routes() -> dict:
    routes = {"/": (200, {}, LISTING), "/set": (200, {}, COOKIE_SETTER), "/show": (200, {}, COOKIE_SHOWER)}
    for n in range(1, PRODUCTS + 1):
        routes[f"/product/{n}"] = (200, {}, f"<html><title>Product {n}</title><body><h1>Product {n}</h1></body></html>")
    return routes


def browser_processes(root_pid: int) -> list[psutil.Process]:
    """Chromium's processes (browser, zygotes, renderers, utilities) among `root_pid`'s descendants."""
    found = []
    for process in psutil.Process(root_pid).children(recursive=True):
        try:
            if "chromium" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def still_running(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in processes:
        try:  # is_running() also tells a reused pid apart (by its start time)
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


def wait_gone(processes: list[psutil.Process], *, why: str) -> float:
    """Seconds until every one of `processes` exited (fails after GONE_WITHIN)."""
    started = time.monotonic()
    while alive := still_running(processes):
        assert time.monotonic() - started < GONE_WITHIN, f"{why}: still running {[p.pid for p in alive]}"
        time.sleep(0.1)
    return time.monotonic() - started


def watch_browser(root_pid: int, until, *, timeout: float = 60) -> list[psutil.Process]:
    """Chromium's processes under `root_pid` seen while waiting for `until()` (at least one must appear)."""
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + timeout
    while not (seen and until()):
        assert time.monotonic() < deadline, "no Chromium process appeared under the worker"
        seen.update({process.pid: process for process in browser_processes(root_pid)})
        time.sleep(0.05)
    return list(seen.values())


def test_a_script_built_listing_yields_its_products_only_when_rendered(api, builtins, job_waiter):
    with HostileSite(shop_routes()) as shop:
        plain = job_waiter(submit(api, url=f"{shop.url}/", options={"maxdepth": 1}))
        rendered_id = submit(api, url=f"{shop.url}/", options={"maxdepth": 1, "render": True, "wait_for": "a.product"})
        rendered = job_waiter(rendered_id)

    assert plain.status == rendered.status == "succeeded", (plain.error_message, rendered.error_message)
    assert plain.stats["items"] == 1 and plain.stats["render"]["pages"] == 0
    titles = set(Item.objects.filter(url__startswith=f"{shop.url}/product/").values_list("data__title", flat=True))
    assert titles == {f"Product {n}" for n in range(1, PRODUCTS + 1)}
    assert rendered.stats["items"] == 1 + PRODUCTS
    assert rendered.stats["render"]["pages"] == 1 + PRODUCTS and rendered.stats["render"]["seconds"] > 0
    assert all(shop.hits[f"/product/{n}"] == 1 for n in range(1, PRODUCTS + 1))  # only the rendered job found them


def test_two_requesters_rendered_jobs_on_one_worker_do_not_see_each_others_cookies(
    api, builtins, crawl_worker, job_waiter
):
    from access.services import token_issue

    _, bob_token = token_issue(requester_name="bob")
    bob = APIClient()
    bob.credentials(HTTP_AUTHORIZATION=f"Token {bob_token}")
    with HostileSite(shop_routes()) as site:
        alice_job = job_waiter(submit(api, url=f"{site.url}/set", options={"maxdepth": 1, "render": True}))
        bob_job = job_waiter(submit(bob, url=f"{site.url}/show", options={"render": True}))

    assert alice_job.worker == bob_job.worker  # one worker process rendered both
    titles = {
        owner: {item["data"]["title"] for item in client.get(f"/api/jobs/{job.pk}/items/").json()["results"]}
        for owner, client, job in (("alice", api, alice_job), ("bob", bob, bob_job))
    }
    assert "cookies:secret=alice-7f3a" in titles["alice"]  # within a job, its page's cookie is kept
    assert titles["bob"] == {"cookies:"}


def test_a_cancelled_rendered_crawl_leaves_no_chromium_process(api, builtins, crawl_worker, job_waiter):
    site = TreeSite(pages=400, delay=0.2)
    try:
        job_id = submit(api, url=f"{site.url}/p/0", options={"maxdepth": 20, "render": True})
        seen = watch_browser(crawl_worker.process.pid, lambda: sum(site.page_hits().values()) >= 5)
        cancelled_at = time.monotonic()
        assert api.post(f"/api/jobs/{job_id}/cancel/").status_code == 202
        job = job_waiter(job_id)
        gone_after = wait_gone(seen, why="Chromium outlived its cancelled crawl") + (time.monotonic() - cancelled_at)
    finally:
        site.server.shutdown()

    assert (job.status, job.error_class) == ("cancelled", "cancelled")
    assert browser_processes(crawl_worker.process.pid) == []
    print(f"cancel: {len(seen)} Chromium processes, all gone {gone_after:.1f} s after the cancel")


@pytest.mark.usefixtures("fast_throttle")
def test_a_sigkilled_rendering_worker_leaves_no_chromium_and_its_crawl_resumes_from_its_frontier(
    api, builtins, cluster
):
    tree_site = TreeSite(pages=63, delay=0.25)
    try:
        sigkilled_and_resumed(api, tree_site, cluster)
    finally:
        tree_site.server.shutdown()


def sigkilled_and_resumed(api, tree_site: TreeSite, cluster) -> None:
    job_id = submit(api, url=f"{tree_site.url}/p/0", options={"maxdepth": 20, "render": True})
    running = wait_job(job_id, lambda j: j.status == "running", timeout=60, cluster=cluster, why="never started")
    pool_pid = int(running.worker.rsplit("/", 1)[-1])
    seen = watch_browser(pool_pid, lambda: sum(tree_site.page_hits().values()) >= 15)
    os.kill(pool_pid, signal.SIGKILL)
    in_flight = in_flight_paths(job_id)
    gone_after = wait_gone(seen, why="Chromium outlived its SIGKILLed worker process")

    job = wait_job(job_id, lambda j: j.status not in ("queued", "running"), timeout=120, cluster=cluster, why="no end")

    assert (job.status, job.attempt) == ("succeeded", 2), job.error_message
    hits = tree_site.page_hits()
    assert set(hits) == tree_site.all_paths()
    twice = {path for path, count in hits.items() if count > 1}
    assert twice <= in_flight, f"fetched again though not in flight at the kill: {sorted(twice - in_flight)}"
    assert job.stats["render"]["pages"] >= tree_site.pages - 15  # attempt 2 rendered what was left
    print(f"SIGKILL: {len(seen)} Chromium processes, all gone {gone_after:.1f} s after the kill")
