"""Trust, end to end with real workers: a live job never goes stale while the database is slow."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from crawls.live.beats import beat_age
from crawls.models import CrawlJob
from items.models import Item
from registry.models import Scraper, ScraperVersion
from tests.sites import ServedSite, send_body

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL: a lock on the items table alone, jobs stay writable"
)


def submit(api, **spec) -> str:
    response = api.post("/api/jobs/", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@postgres_only
def test_a_2000_item_flush_on_a_slow_database_never_lets_the_job_go_stale(api, builtins, site, job_waiter):
    """Item writes wait 8 s behind a lock (a slow database). The tick is stuck in the upsert all that time, so the
    row's `heartbeat_at` ages; the attempt's heartbeat thread must keep beating in Redis, so the reaper (which calls a
    job stale only when both are old) never takes the live job for a dead one."""
    scraper = Scraper.objects.create(name="many")
    ScraperVersion.objects.create(
        scraper=scraper, version="1.0.0", spider="tests.fixtures.spiders.ManyItemsSpider", is_default=True
    )
    locker = connections.create_connection("default")
    locker.set_autocommit(False)
    with locker.cursor() as cursor:
        cursor.execute("LOCK TABLE crawls_item IN SHARE ROW EXCLUSIVE MODE")  # reads go on, writes wait
    try:
        job_id = submit(api, url=f"{site.url}/product-1.html", scraper="many", options={"config": {"count": 2000}})
        worst, release_at = 0.0, time.monotonic() + 8
        while time.monotonic() < release_at:
            job = CrawlJob.objects.get(pk=job_id)
            if job.status == "running" and job.heartbeat_at:
                row_age = (timezone.now() - job.heartbeat_at).total_seconds()
                beat = beat_age(job_id=job.pk, attempt=job.attempt)
                worst = max(worst, row_age if beat is None else min(row_age, beat))
            time.sleep(0.2)
    finally:
        locker.rollback()
        locker.close()

    finished = job_waiter(job_id, timeout=120)
    assert finished.status == "succeeded", finished.error_message
    assert finished.stats["items_new"] == 2000
    assert finished.attempt == 1, "the reaper took the live job for a dead one"
    # Heartbeats every second in tests (the reaper's stale bound is 18 s). Without the heartbeat thread the liveness
    # would age with the lock, to 8 s; 5 leaves a loaded machine's thread a few seconds late without missing that.
    assert worst < 5, f"the liveness the reaper reads was {worst:.1f}s old while the flush waited for the database"


# --- tenancy -----------------------------------------------------------------------------------------------


def test_two_requesters_crawling_the_same_page_each_read_only_their_own_data(builtins, site, job_waiter):
    """Same URL, different cookies and attrs: two items, and no endpoint shows one requester the other's."""
    from tests.clients import client_for

    alice, bob = client_for("alice"), client_for("bob")
    url = f"{site.url}/product-2.html"
    ids = {}
    for name, client in (("alice", alice), ("bob", bob)):
        options = {"cookie": f"session={name}-cookie", "attrs": {"owner_secret": f"{name}-secret"}}
        ids[name] = submit(client, url=url, options=options)
    for job_id in ids.values():
        assert job_waiter(job_id).status == "succeeded"

    for me, client, other in (("alice", alice, "bob"), ("bob", bob, "alice")):
        mine, theirs = ids[me], ids[other]
        items = client.get("/api/items/").json()["results"]
        assert [item["data"]["owner_secret"] for item in items] == [f"{me}-secret"]
        job_items = client.get(f"/api/jobs/{mine}/items/").json()["results"]
        assert [item["data"]["owner_secret"] for item in job_items] == [f"{me}-secret"]
        pages = [
            client.get("/api/items/"),
            client.get(f"/api/jobs/{mine}/items/"),
            client.get(f"/api/jobs/{mine}/items/?format=jsonl"),
            client.get(f"/api/jobs/{mine}/items/?format=csv"),
            client.get("/api/jobs/"),
            client.get(f"/api/jobs/{mine}/"),
            client.get(f"/api/jobs/{mine}/log/"),
            client.get("/api/batches/"),
            client.get("/api/stats/"),
        ]
        for response in pages:
            assert response.status_code == 200, response
            body = b"".join(response.streaming_content) if response.streaming else response.content
            assert f"{other}-secret".encode() not in body and theirs.encode() not in body, response.request
        for path in (f"/api/jobs/{theirs}/", f"/api/jobs/{theirs}/items/", f"/api/jobs/{theirs}/log/"):
            assert client.get(path).status_code == 404, path
    assert Item.objects.filter(url=url).count() == 2


# --- the private-target guard at fetch time -----------------------------------------------------------------


class ToPrivate(ServedSite):
    """A 'public' site (on 127.0.0.2, which the test lets through TRAWL_PRIVATE_TARGETS_ALLOWED) whose /go redirects
    to the private local site and whose /page links to it."""

    def __init__(self, private_url: str) -> None:
        from http.server import BaseHTTPRequestHandler

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/go":
                    self.send_response(302)
                    self.send_header("Location", f"{private_url}/product-1.html")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                send_body(self, 200, f'<html><title>Page</title><a href="{private_url}/product-2.html">p</a></html>')

            def log_message(self, *args):
                pass

        super().__init__(Handler, host="127.0.0.2")


@pytest.fixture
def production_worker(django_db_setup, django_db_blocker, redis_server, tmp_path):
    from tests.callbacks.harness import running_alone
    from tests.workers import Worker

    env = {
        "DJANGO_SETTINGS_MODULE": "project.settings_production",
        "SECRET_KEY": "trust-tests-" + "x" * 40,
        "TRAWL_PRIVATE_TARGETS_ALLOWED": "127.0.0.2/32",
    }
    worker = Worker(queues="crawls", concurrency=1, env=env, log_dir=tmp_path)
    with running_alone(worker):
        yield worker


def wait_final(job_id: str, worker, timeout: float = 90) -> CrawlJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = CrawlJob.objects.get(pk=job_id)
        if job.status in ("succeeded", "failed", "cancelled", "dead"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job.status}\n{worker.log_tail()}")


def test_redirects_and_links_to_private_addresses_are_refused_under_the_production_settings(
    api, builtins, site, production_worker
):
    with ToPrivate(site.url) as public:
        before = dict(site.hits)
        # Both hosts allowed, so only the guard stands between the job and the private site.
        options = {"maxdepth": 1, "allowed_domains": ["127.0.0.2", "127.0.0.1"]}
        redirected = wait_final(submit(api, url=f"{public.url}/go", options=options), production_worker)
        linked = wait_final(submit(api, url=f"{public.url}/page", options=options), production_worker)

    assert (redirected.status, redirected.error_class) == ("failed", "blocked_target"), redirected.stats
    assert site.hits["/product-1.html"] == before.get("/product-1.html", 0), "the redirect was followed"
    assert linked.status == "succeeded", linked.error_message
    assert linked.stats["refused_private"] >= 1  # the link (and its host's robots.txt)
    assert site.hits["/product-2.html"] == before.get("/product-2.html", 0), "the private link was fetched"


# --- blocks ------------------------------------------------------------------------------------------------


def test_a_captcha_page_answered_200_ends_the_job_blocked_and_the_source_backs_off(
    admin_api, builtins, site, job_waiter
):
    (site.root / "captcha.html").write_text(
        "<html><title>Just a moment</title><div class='g-recaptcha' data-sitekey='x'></div></html>"
    )
    source = admin_api.post("/api/sources/", {"url": f"{site.url}/captcha.html", "kind": "product"}, format="json")
    assert source.status_code == 201, source.content
    job = admin_api.post(f"/api/sources/{source.json()['id']}/crawl/").json()

    finished = job_waiter(job["id"])
    deadline = time.monotonic() + 20
    while admin_api.get(f"/api/sources/{source.json()['id']}/").json()["consecutive_failures"] == 0:
        assert time.monotonic() < deadline, "the source never heard of the block"
        time.sleep(0.2)
    after = admin_api.get(f"/api/sources/{source.json()['id']}/").json()

    assert (finished.status, finished.error_class) == ("failed", "blocked"), finished.error_message
    assert finished.stats["blocks"]["captcha"] == 1
    assert "backoff" in after["schedule_note"]
    next_sync = datetime.fromisoformat(after["next_sync_at"])
    assert next_sync >= timezone.now() + timedelta(minutes=50)  # 1 h back-off, not the normal interval
