"""The crochet bridge: whatever way `run_spider` is left, the crawl stops with it.

Run in a subprocess of its own: the reactor is process-wide and the test process must not own one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.workers import BASE_DIR, last_json_line, script_run

SCRIPT = """
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from django.db import OperationalError
from tests.runtime.frontier_crawl import link_crawl

url = sys.argv[1]
ticks = []

def tick(session):
    ticks.append(1)
    if len(ticks) >= 3:
        raise OperationalError("database is locked")  # what an upsert on a busy database raises
    return ""

try:
    link_crawl(url, on_tick=tick, tick_seconds=0.5)
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
from crawls.services.shards import job_frontier
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick

url, job = sys.argv[1], uuid.uuid4().hex
frontier = job_frontier(job)

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
    done = script_run(IDLE_SCRIPT, f"{site.url}/product-1.html", env=env)

    assert done.returncode == 0, done.stderr
    reason, items, seconds = done.stdout.split()
    assert (reason, items) == ("finished", "1")
    assert float(seconds) < 15, f"the crawl ended {seconds} s after it started: it waited for the 30 s tick"


HANDOVER_SCRIPT = """
import json, os, sys, time, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from scrapy import Request
from runtime.frontier import Frontier, codec
from crawls.services.shards import job_frontier
from runtime.frontier import scheduler
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick

# An idle shard looks at the frontier again only at Scrapy's own heartbeat (5 s), never at this poll.
scheduler.IDLE_POLL_SECONDS = 120
site, job = sys.argv[1], uuid.uuid4().hex
frontier, other = job_frontier(job), job_frontier(job, shard=1)  # the other shard of the job is played from here
other.renew()
other.push(b"held elsewhere")
held = other.pop()  # in flight at the other shard: the crawl below cannot end, it waits
events, queued = {}, []

def observed(method, record):
    def wrapper(self, *args):
        result = method(self, *args)
        record(self, result)
        return result
    return wrapper

def on_verdict(shard, verdict):
    if shard.shard == 0 and (verdict != "work" or queued):
        events.setdefault(verdict, time.monotonic())

def on_request(scheduler_, request):
    if request is not None and request.url.endswith("/product-2.html"):
        events.setdefault("taken", time.monotonic())

Frontier.try_finish = observed(Frontier.try_finish, on_verdict)
scheduler.FrontierScheduler.next_request = observed(scheduler.FrontierScheduler.next_request, on_request)
store = storing_tick(frontier)

def tick(session):
    if "wait" in events and not queued:  # idle, waiting for the other shard: which now queues a page
        other.commit(requests=[(codec.encode(Request(f"{site}/product-2.html")), 0, None)])
        queued.append(time.monotonic())
    if "taken" in events and held:  # then finishes its own request and leaves; the crawl below may end
        other.commit(done=held)
        held.clear()
        other.try_finish()
    return store(session)

crawl, _ = run_spider(
    spider_cls=LinkSpider,
    settings=frontier_crawl_settings(job),
    spider_kwargs={"url": site, "start_urls": [f"{site}/product-1.html"], "options": {"maxdepth": 0}, "config": {}},
    timeout=90,
    on_tick=tick,
    tick_seconds=0.2,
)
frontier.delete()
print(json.dumps({"reason": crawl.finish_reason, "pages": crawl.stats.get("response_received_count"),
                  "work_to_taken": events["taken"] - events["work"]}))
"""


def test_an_idle_shard_takes_what_another_shard_queued_as_soon_as_it_sees_it(site, redis_server):
    """A shard waiting for the others asks the frontier now and then; once the answer is "work" it takes it at once,
    not at its next poll (a parallel crawl's shards go idle whenever the other one holds the whole queue). Without
    that, it took until Scrapy's next heartbeat here, 5 s later."""
    env = {**os.environ, "REDIS_URL": redis_server, "TRAWL_INSTALLATION_ID": "runner-handover-test"}
    done = script_run(HANDOVER_SCRIPT, site.url, env=env)

    assert done.returncode == 0, done.stderr
    report = last_json_line(done)
    assert (report["reason"], report["pages"]) == ("finished", 2)  # its own page, and the one the other shard queued
    assert report["work_to_taken"] < 2.5


def test_the_item_queue_is_bounded_and_the_reactor_waits_for_room():
    """A crawl faster than the database must not buffer itself in memory: the reactor's item handler waits."""
    import threading

    from runtime.bridge.runner import ITEM_QUEUE_MAX, CrawlSession

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


HOLD_SCRIPT = """
import json, os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from runtime.bridge.runner import REACTOR_HOLD_MAX_SECONDS, live_stats
from runtime.bridge.reactor import ensure_reactor
from tests.runtime.frontier_crawl import link_crawl

ensure_reactor()
from twisted.internet import reactor, task

beats = []  # what the reactor thread does while the task thread ticks
reactor.callFromThread(lambda: task.LoopingCall(beats.append, 1).start(0.005))
ticks = []

def tick(session):
    if len(ticks) == 2 or session.crawler is None or not session.crawler.stats.get_value("response_received_count"):
        return ""
    if not ticks:  # a short tick, as an item upsert is
        before = len(beats)
        time.sleep(0.3)
        started = time.monotonic()
        stats = live_stats(session)
        ticks.append({"beats": len(beats) - before, "stats_seconds": time.monotonic() - started,
                      "responses": stats.get("response_received_count", 0)})
        return ""
    before = len(beats)  # a tick longer than the bound: a database that lags
    time.sleep(REACTOR_HOLD_MAX_SECONDS + 0.5)
    ticks.append({"beats": len(beats) - before})
    return "cancelled"

crawl = link_crawl(sys.argv[1], on_tick=tick, tick_seconds=0.2)
print(json.dumps({"ticks": ticks, "stopped_because": crawl.stopped_because}), flush=True)
"""


def test_the_reactor_waits_while_the_task_thread_ticks_but_never_longer_than_the_bound(fast_slow_site):
    """Under the GIL a busy task thread beside the reactor slows the crawl far beyond its own CPU (reactor_held):
    the reactor waits for the tick, which can still read the crawl's stats, and goes on alone after the bound."""
    done = script_run(HOLD_SCRIPT, f"{fast_slow_site.url}/slow/700000")

    assert done.returncode == 0, done.stderr
    report = last_json_line(done)
    short, long = report["ticks"]
    assert short["beats"] == 0, "the reactor ran while the task thread ticked"
    assert short["responses"] >= 1 and short["stats_seconds"] < 1, "the stats were not readable during the tick"
    assert long["beats"] > 10, "the reactor stayed stopped past REACTOR_HOLD_MAX_SECONDS"
    assert report["stopped_because"] == "cancelled"


def test_a_tick_does_not_wait_for_a_reactor_that_may_be_waiting_for_room_in_the_item_queue():
    from runtime.bridge.runner import ITEM_QUEUE_MAX, CrawlSession, reactor_held

    session = CrawlSession()
    session.crawler = object()  # a crawl is running
    for number in range(ITEM_QUEUE_MAX):
        session.on_item({"n": number})

    started = time.monotonic()
    with reactor_held(session):
        held = session.reactor_held

    assert not held
    assert time.monotonic() - started < 0.2, "the tick waited for a reactor blocked on the full queue"


def test_a_tick_holds_no_reactor_that_other_crawls_of_the_process_share():
    """With several crawls on one reactor (the crawl host), one crawl's ticks must not hold the others' requests."""
    from runtime.bridge import runner

    session = runner.CrawlSession()
    session.crawler = object()  # a crawl is running
    runner._crawls_running_count(+2)  # it and another one
    try:
        started = time.monotonic()
        with runner.reactor_held(session):
            held = session.reactor_held
    finally:
        runner._crawls_running_count(-2)

    assert not held
    assert time.monotonic() - started < runner.REACTOR_HOLD_MAX_SECONDS, "the tick asked the reactor to wait for it"
