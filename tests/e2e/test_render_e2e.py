"""Rendered crawls end to end: real `celery worker` processes, Debian's Chromium, local sites.

- Two requesters' rendered jobs on one worker process: a cookie one job's page set never reaches the other's pages.
- A cancelled rendered crawl leaves no Chromium process (read from the process table).
- A SIGKILLed pool process takes its Chromium with it, and the crawl resumes from its frontier on attempt 2.

The first two share the session's crawl worker (the settings `make run` ships). A script-built listing yielding its
products only when rendered: tests/demo/test_demo_shop_e2e.py; the guard's side: tests/security/test_render_guard.py.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from rest_framework.test import APIClient

from crawls.models import CrawlJob
from tests.e2e.frontier_stack import (
    FAST_REAPER,
    TreeSite,
    _cluster,
    fast_throttle,  # noqa: F401 (a fixture)
    fetched_twice_only_in_flight,
    in_flight_paths,
    wait_job,
)
from tests.security.hostile_site import HostileSite, submit

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

COOKIE_SETTER = """<html><head><title>set</title></head><body>
<script>document.cookie = "secret=alice-7f3a; path=/";</script><a href="/show">show</a></body></html>"""
COOKIE_SHOWER = """<html><head><title>show</title></head><body>
<script>document.title = "cookies:" + document.cookie;</script></body></html>"""
GONE_WITHIN = 30  # seconds a test waits for Chromium to exit before failing


@pytest.fixture
def cluster(django_db_setup, django_db_blocker, redis_server, tmp_path):
    """Two crawl workers, an ops worker and beat (the reaper requeues a killed crawl): tests/e2e/frontier_stack.py."""
    yield from _cluster(tmp_path, FAST_REAPER)


def cookie_routes() -> dict:
    return {"/set": (200, {}, COOKIE_SETTER), "/show": (200, {}, COOKIE_SHOWER)}


def browser_processes(root_pid: int, *, main_only: bool = False) -> list[psutil.Process]:
    """Chromium's processes (browser, zygotes, renderers, utilities) among `root_pid`'s descendants; `main_only`: the
    browsers themselves (their helpers run with a --type=...)."""
    found = []
    try:
        descendants = psutil.Process(root_pid).children(recursive=True)
    except (psutil.Error, OSError):  # one of them exited while the table was read: read it again
        return browser_processes(root_pid, main_only=main_only)
    for process in descendants:
        try:
            command = " ".join(process.cmdline())
        except (psutil.Error, OSError):
            continue
        if "chromium" in command and not (main_only and "--type=" in command):
            found.append(process)
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
        assert time.monotonic() < deadline, f"in {timeout} s: {len(seen)} Chromium processes seen, until() {until()}"
        seen.update({process.pid: process for process in browser_processes(root_pid)})
        time.sleep(0.05)
    return list(seen.values())


def test_two_requesters_rendered_jobs_on_one_worker_do_not_see_each_others_cookies(
    api, builtins, crawl_worker, job_waiter
):
    from access.services import token_issue

    _, bob_token = token_issue(requester_name="bob")
    bob = APIClient()
    bob.credentials(HTTP_AUTHORIZATION=f"Token {bob_token}")
    with HostileSite(cookie_routes()) as site:
        alice_job = job_waiter(submit(api, url=f"{site.url}/set", options={"maxdepth": 1, "render": True}))
        bob_job = job_waiter(submit(bob, url=f"{site.url}/show", options={"render": True}))

    assert alice_job.worker == bob_job.worker  # one worker process rendered both
    titles = {
        owner: {item["data"]["title"] for item in client.get(f"/api/jobs/{job.pk}/items/").json()["results"]}
        for owner, client, job in (("alice", api, alice_job), ("bob", bob, bob_job))
    }
    assert "cookies:secret=alice-7f3a" in titles["alice"]  # within a job, its page's cookie is kept
    assert titles["bob"] == {"cookies:"}


def test_a_rendered_job_keeps_screenshots_of_its_first_page_and_of_a_failed_wait(
    api, builtins, job_waiter, admin_client
):
    routes = {
        "/": (200, {}, '<html><title>first</title><body><p id="ready">ready</p><a href="/late">late</a></body></html>'),
        "/late": (200, {}, "<html><title>late</title><body>what it waits for never comes</body></html>"),
    }
    options = {"maxdepth": 1, "render": True, "wait_for": "#ready", "render_timeout": 2, "screenshots": 1}
    with HostileSite(routes) as site:
        job = job_waiter(submit(api, url=f"{site.url}/", options=options))

    assert job.status == "succeeded", job.error_message
    assert job.stats["render"]["wait_timeouts"] == 1 and job.stats["render"]["screenshots"] == 2
    shots = api.get(f"/api/jobs/{job.pk}/screenshots/").json()
    assert sorted((shot["reason"], shot["url"]) for shot in shots) == [
        ("asked", f"{site.url}/"),
        ("failure", f"{site.url}/late"),
    ]
    image = api.get(shots[0]["image_url"])
    assert image["Content-Type"] == "image/jpeg" and image.content[:2] == b"\xff\xd8"
    page = admin_client.get(f"/admin/crawls/crawljob/{job.pk}/change/").content.decode()
    assert page.count('src="data:image/jpeg;base64,') == 2


@pytest.mark.parametrize(
    "bound",
    [{"TRAWL_RENDER_RECYCLE_PAGES": "10"}, {"TRAWL_RENDER_RECYCLE_PAGES": "0", "TRAWL_RENDER_RECYCLE_MEMORY_MB": "1"}],
    ids=["pages", "memory"],
)
def test_a_long_rendered_crawl_moves_to_a_fresh_chromium_every_recycle_pages(
    bound, api, builtins, django_db_setup, django_db_blocker, redis_server, tmp_path
):
    """TRAWL_RENDER_RECYCLE_PAGES shrunk from 500 to 10, or TRAWL_RENDER_RECYCLE_MEMORY_MB from 2048 to 1 (looked at
    every 10 pages) — the mechanism, not the default: a 40-page crawl renders on at least four browsers in turn, each
    gone once retired, and no page is lost."""
    from tests.callbacks.harness import running_alone
    from tests.workers import Worker

    worker = Worker(env=bound, log_dir=tmp_path)
    site = TreeSite(pages=40, delay=0.05)
    try:
        with running_alone(worker):
            job_id = submit(api, url=f"{site.url}/p/0", options={"maxdepth": 20, "render": True})
            browsers: dict[int, psutil.Process] = {}
            job = CrawlJob.objects.get(pk=job_id)
            while job.status in ("queued", "running"):
                browsers.update({p.pid: p for p in browser_processes(worker.process.pid, main_only=True)})
                time.sleep(0.05)
                job = CrawlJob.objects.get(pk=job_id)
            wait_gone(list(browsers.values()), why="a retired Chromium outlived its crawl")
            # Helpers (renderers, zygotes) started after the last look, too: the table read again until empty.
            wait_gone(browser_processes(worker.process.pid), why="Chromium's helpers outlived their browser")
    finally:
        site.server.shutdown()

    assert job.status == "succeeded", f"{job.error_message}\n{worker.log_tail()}"
    assert set(site.page_hits()) == site.all_paths() and job.stats["render"]["pages"] == 40
    assert len(browsers) >= 4, f"Chromium browser processes seen: {sorted(browsers)}"
    print(f"recycle: 40 pages rendered on {len(browsers)} browsers in turn")


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
    wait_gone(browser_processes(crawl_worker.process.pid), why="Chromium processes started after the last look")
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
    fetched_twice_only_in_flight(tree_site, in_flight)
    assert job.stats["render"]["pages"] >= tree_site.pages - 15  # attempt 2 rendered what was left
    print(f"SIGKILL: {len(seen)} Chromium processes, all gone {gone_after:.1f} s after the kill")
