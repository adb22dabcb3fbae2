"""The crochet bridge: whatever way `run_spider` is left, the crawl stops with it.

Run in a subprocess of its own: the reactor is process-wide and the test process must not own one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.workers import BASE_DIR

SCRIPT = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from django.db import OperationalError
from crawls.scraping.runner import run_spider
from crawls.scraping.spiders.link import LinkSpider

url = sys.argv[1]
ticks = []

def tick(session):
    ticks.append(1)
    if len(ticks) >= 3:
        raise OperationalError("database is locked")  # what an upsert on a busy database raises
    return ""

try:
    run_spider(
        spider_cls=LinkSpider,
        settings={"CONCURRENT_REQUESTS": 1, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "ERROR"},
        spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 50}, "config": {}},
        timeout=60,
        on_tick=tick,
        tick_seconds=0.5,
    )
except OperationalError:
    print("raised", flush=True)
time.sleep(4)  # the process lives on, as a Celery pool process would: its crawl must not
print("exit", flush=True)
"""


@pytest.fixture
def fast_slow_site(site):
    delay, site.slow_delay = site.slow_delay, 0.1
    yield site
    site.slow_delay = delay


def test_an_exception_from_the_tick_stops_the_crawl_before_run_spider_raises(fast_slow_site):
    site = fast_slow_site
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, f"{site.url}/slow/500000"],
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stdout.readline().strip()
        hits_when_raised = site.slow_hits()
        time.sleep(3)
        hits_later = site.slow_hits()
        rest = process.stdout.readline().strip()
    finally:
        process.kill()
        process.wait(10)

    assert first == "raised", process.stderr.read()
    assert hits_when_raised >= 2  # it was crawling
    assert hits_later == hits_when_raised, "the crawl kept fetching after run_spider gave up"
    assert rest == "exit"


IDLE_SCRIPT = """
import os, sys, time, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from crawls.frontier import Frontier
from crawls.scraping.runner import run_spider
from crawls.scraping.spiders.link import LinkSpider
from tests.crawls.frontier_crawl import frontier_crawl_settings, storing_tick

url, job = sys.argv[1], uuid.uuid4().hex
frontier = Frontier(job)

started = time.monotonic()
crawl, session = run_spider(
    spider_cls=LinkSpider,
    settings=frontier_crawl_settings(job),
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 0}, "config": {}},
    timeout=120,
    on_tick=storing_tick(frontier),
    tick_seconds=30,
)
print(crawl.finish_reason, crawl.stats.get("item_scraped_count"), f"{time.monotonic() - started:.1f}", flush=True)
frontier.delete()
"""


def test_a_frontier_crawl_waiting_for_its_items_to_be_stored_wakes_the_task_thread(site, redis_server):
    """The frontier lets a crawl end only once its written-ahead items are stored, which the task thread does on its
    tick: an idle crawl asks for that tick at once. Before, a one-page job lasted until the next tick (0.5 s by
    default; 30 s here, so a crawl that waits for it cannot pass)."""
    env = {**os.environ, "REDIS_URL": redis_server, "TRAWL_INSTALLATION_ID": "runner-idle-test"}
    done = subprocess.run(
        [sys.executable, "-c", IDLE_SCRIPT, f"{site.url}/product-1.html"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    reason, items, seconds = done.stdout.split()
    assert (reason, items) == ("finished", "1")
    assert float(seconds) < 15, f"the crawl ended {seconds} s after it started: it waited for the 30 s tick"


def test_the_item_queue_is_bounded_and_the_reactor_waits_for_room():
    """A crawl faster than the database must not buffer itself in memory: the reactor's item handler waits."""
    import threading

    from crawls.scraping.runner import ITEM_QUEUE_MAX, CrawlSession

    session = CrawlSession()
    for number in range(ITEM_QUEUE_MAX):
        session.on_item({"n": number})
    extra = threading.Thread(target=session.on_item, args=({"n": "extra"},), daemon=True)
    extra.start()
    extra.join(1.0)
    assert extra.is_alive(), "an item past the bound was queued without waiting"

    drained = session.drain(10)
    extra.join(5.0)

    assert len(drained) == 10 and not extra.is_alive()
    assert session.items.qsize() == ITEM_QUEUE_MAX - 10 + 1
    session.abandoned = True  # a crawl nobody drains any more never blocks its reactor
    session.on_item({"n": "late"})
