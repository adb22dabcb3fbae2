"""The crochet bridge: whatever way `run_spider` is left, the crawl stops with it.

Run in a subprocess of its own: the reactor is process-wide and the test process must not own one.
"""

from __future__ import annotations

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


def test_the_item_queue_is_bounded_and_the_reactor_waits_for_room():
    """A crawl faster than the database must not buffer itself in memory: the reactor's item handler waits."""
    import threading

    from crawls.scraping.runner import ITEM_QUEUE_MAX, CrawlSession

    session = CrawlSession()
    for number in range(ITEM_QUEUE_MAX):
        session.on_item({"n": number}, None, None)
    extra = threading.Thread(target=session.on_item, args=({"n": "extra"}, None, None), daemon=True)
    extra.start()
    extra.join(1.0)
    assert extra.is_alive(), "an item past the bound was queued without waiting"

    drained = session.drain(10)
    extra.join(5.0)

    assert len(drained) == 10 and not extra.is_alive()
    assert session.items.qsize() == ITEM_QUEUE_MAX - 10 + 1
    session.abandoned = True  # a crawl nobody drains any more never blocks its reactor
    session.on_item({"n": "late"}, None, None)
