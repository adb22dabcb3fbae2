"""A warm shutdown of a crawl with DOWNLOAD_DELAY drops the requests waiting for their delay (runtime.bridge.stopping)
instead of fetching them one delay apart, and loses none of them: they stay in the job's frontier, and the next
attempt fetches every page the first one did not.

Measured (DOWNLOAD_DELAY = 1, a 9-page shop, the shutdown after 3 responses): the first attempt fetched 3 pages and
handed 3 queued requests back; the second fetched the other 6, each page once in all. Before the fix the first
attempt went on to fetch the 3 queued requests one second apart after it had handed them back, and the second attempt
fetched those 3 pages again.

Each attempt runs in a process of its own: the reactor is process-wide."""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import pytest

from tests.sites import LocalSite, write_catalogue
from tests.workers import last_json_line, script_run

pytestmark = pytest.mark.timeout(240)
HELD_SECONDS = 1.5

ATTEMPT = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from crawls.services.shards import frontier_settings, job_frontier
from runtime.bridge.runner import live_stats, run_spider
from runtime.spiders.link import LinkSpider
from tests.crawler import composed
from tests.runtime.frontier_crawl import storing_tick

url, job, attempt, stop_after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
delay, held = float(sys.argv[5]), sys.argv[6] == "held"
frontier = job_frontier(job, attempt=attempt, shard=0)
if url == "delete":
    frontier.delete()
    print("{}")
    sys.exit(0)
store = storing_tick(frontier)
settings = composed({"TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR", "DOWNLOAD_DELAY": delay,
                     "DOWNLOAD_DELAY_JITTER": 0, **frontier_settings(job_id=job, attempt=attempt, shard=0)})
if held:
    settings["DOWNLOADER_MIDDLEWARES"] = {"tests.runtime.test_stopping.HeldBack": 950}


def tick(session):
    store(session)
    if stop_after and live_stats(session).get("response_received_count", 0) >= stop_after:
        frontier.release()  # what a warm shutdown does first (crawls.services.shards.Shard.requeue_now)
        return "shutdown"
    return ""


crawl, _ = run_spider(
    spider_cls=LinkSpider, settings=settings, timeout=120, on_tick=tick, tick_seconds=0.2,
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 3}, "config": {}},
)
stats = crawl.stats
print(json.dumps({"stopped": crawl.stopped_because, "reason": crawl.finish_reason,
                  "dropped": stats.get("downloader/dropped_closing", 0), "queued": frontier.pending(),
                  "in_flight": len(frontier.inflight_payloads())}))
"""


@pytest.fixture
def shop(tmp_path):
    write_catalogue(tmp_path / "shop", products=6, per_page=3)
    with LocalSite(tmp_path / "shop") as site:
        yield site


class HeldBack:
    """Keeps every product page's request in the downloader middlewares for a while, as the throttle keeps one that
    waits for its token: it reaches the downloader only after the stop began."""

    async def process_request(self, request):
        if "/product-" in request.url:
            await asyncio.sleep(HELD_SECONDS)


def attempt(url: str, job: str, number: int, *, stop_after: int = 0, delay: float = 1, held: bool = False) -> dict:
    # An installation of its own: the frontier's keys are named by it, and the test database has none to derive it.
    env = {**os.environ, "TRAWL_INSTALLATION_ID": f"stopping-{job[:8]}"}
    args = (url, job, str(number), str(stop_after), str(delay), "held" if held else "")
    done = script_run(ATTEMPT, *args, env=env, timeout=150)
    assert done.returncode == 0, done.stderr[-4000:]
    return last_json_line(done)


def test_a_warm_shutdown_drops_what_waits_for_its_delay_and_the_next_attempt_fetches_it(shop):
    job, start = uuid.uuid4().hex, f"{shop.url}/index.html"
    try:
        first = attempt(start, job, 1, stop_after=3)
        fetched_first = sum(shop.hits.values())
        second = attempt(start, job, 2)
    finally:
        attempt("delete", job, 2)

    assert first["stopped"] == "shutdown" and first["reason"] == "shutdown", first
    # Handed back, not fetched one second apart: queued by the release, or (a commit that took them landed just after
    # it, on a loaded machine) still in this attempt's flight, which the next attempt takes once its lease runs out.
    assert first["dropped"] >= 1 and first["queued"] + first["in_flight"] >= 1, first
    assert fetched_first <= 3 + 1, dict(shop.hits)  # 3 pages, and at most one let go before the stop
    assert max(shop.hits.values()) == 1, dict(shop.hits)  # no page fetched twice
    assert second["reason"] == "finished", second
    pages = {f"/{path.name}" for path in shop.root.glob("*.html")}
    assert pages <= set(shop.hits), f"never fetched: {sorted(pages - set(shop.hits))}\n{json.dumps(second)}"


def test_a_request_that_reaches_the_downloader_after_the_stop_began_is_dropped_too(tmp_path):
    """The shutdown comes after the index and the list page; the list's 6 product requests are still held in the
    downloader middlewares then, and reach the slot's queue 1.5 s later, 1.5 s before their delay (3 s) is up."""
    write_catalogue(tmp_path / "flat", products=6, per_page=6)
    job = uuid.uuid4().hex
    with LocalSite(tmp_path / "flat") as flat:
        start = f"{flat.url}/index.html"
        try:
            first = attempt(start, job, 1, stop_after=2, delay=3, held=True)
            fetched_first = dict(flat.hits)
            second = attempt(start, job, 2, delay=0)
        finally:
            attempt("delete", job, 2)
        pages = {f"/{path.name}" for path in flat.root.glob("*.html")}

        assert fetched_first == {"/index.html": 1, "/list-1.html": 1}, (fetched_first, first)
        assert first["dropped"] == 6 and first["queued"] + first["in_flight"] == 6, first  # as above
        assert second["reason"] == "finished" and pages <= set(flat.hits), (second, dict(flat.hits))
        assert max(flat.hits.values()) == 1, dict(flat.hits)
