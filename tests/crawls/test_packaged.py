"""A packaged version's crawl, run in its child process by the task thread's loop (crawls.scraping.packaged)."""

from __future__ import annotations

import time
import uuid

import pytest

from crawls.frontier import Frontier
from crawls.scraping.children import child_discard, child_for
from crawls.scraping.packaged import run_packaged
from tests.crawls.frontier_crawl import frontier_crawl_settings, storing_tick
from tests.registry.test_package_envs import package_dirs, packaged  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def test_a_packaged_frontier_crawl_waiting_for_its_items_to_be_stored_wakes_the_task_thread(
    tmp_path, site, redis_server
):
    """The child's idle crawl asks the worker to store its written-ahead items now, and is woken once they are:
    before, a one-page packaged job lasted until the task thread's next tick (30 s here, 0.5 s by default)."""
    version = packaged(tmp_path, dep="1.0")
    job = uuid.uuid4().hex
    frontier = Frontier(job)

    child = child_for(version.package)  # started (and its environment built) before the clock runs
    try:
        started = time.monotonic()
        crawl, _ = run_packaged(
            package=version.package,
            spider="trawlshop.spiders.ShopSpider",
            settings=frontier_crawl_settings(job),
            spider_kwargs={"url": f"{site.url}/product-1.html"},
            timeout=120,
            on_tick=storing_tick(frontier),
            tick_seconds=30,
        )
        seconds = time.monotonic() - started
    finally:
        child_discard(child)
        frontier.delete()

    assert (crawl.finish_reason, crawl.stats.get("item_scraped_count")) == ("finished", 1), crawl
    assert seconds < 15, f"the crawl ended {seconds:.1f} s after it started: it waited for the 30 s tick"
