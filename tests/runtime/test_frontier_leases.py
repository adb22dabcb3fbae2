"""The job's frontier in Redis, shard by shard: in-flight leases, reclaiming a dead shard's requests and items, shards
leaving, releasing; leases renewed while the reactor is blocked."""

from __future__ import annotations

import os
import time

import pytest

from crawls.services.shards import job_frontier
from runtime.frontier import Frontier
from tests.runtime import frontier_fixtures
from tests.workers import last_json_line, script_run

pytestmark = pytest.mark.django_db
frontier, slow_chain = frontier_fixtures.frontier, frontier_fixtures.slow_chain  # fixtures


def test_a_dead_shard_s_unstored_items_are_stored_by_a_live_one(frontier):
    dead = job_frontier("test-job", attempt=1, shard=0)
    dead.renew()
    dead.commit(items=[b'{"n": 1}', b'{"n": 2}', b'{"n": 3}'])
    dead.stored(1)  # its task stored the first before it died
    live = job_frontier("test-job", attempt=2, shard=0)
    live.renew()  # a new attempt: the old one is dead
    assert live.try_finish() == "wait"  # orphans to store first
    assert live.adopt(10) == [b'{"n": 2}', b'{"n": 3}']
    assert live.try_finish() == "wait"  # being stored
    live.adopted()
    assert live.try_finish() == "last"


def test_a_new_attempt_takes_back_what_the_last_one_had_in_flight(frontier):
    frontier.renew()
    frontier.push(b"one")
    frontier.push(b"two")
    frontier.pop()
    second = job_frontier("test-job", attempt=2, shard=0)
    assert second.renew() == 1
    assert sorted(Frontier.payload(member) for member in second.pop(2)) == [b"one", b"two"]


def test_a_dead_shard_s_requests_return_when_its_lease_expires(frontier, settings):
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 0.001
    dead = job_frontier("test-job", attempt=1, shard=1)
    dead.renew()
    dead.push(b"held")
    dead.pop()
    time.sleep(0.05)
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 30
    live = job_frontier("test-job", attempt=1, shard=0)
    assert live.try_finish() == "work"  # the dead shard's request is queued again, for the live one
    live.renew()  # only a shard holding a lease takes requests
    assert [Frontier.payload(member) for member in live.pop()] == [b"held"]


def test_shards_leave_one_by_one_and_the_last_one_knows_it(frontier):
    first, second = job_frontier("test-job", attempt=1, shard=0), job_frontier("test-job", attempt=1, shard=1)
    first.renew()
    second.renew()
    assert first.try_finish() == "done"
    assert second.try_finish() == "last"


def test_a_shard_renewed_once_more_after_it_left_does_not_keep_the_job_from_ending(frontier):
    """A shard's lease thread can renew just after its crawl left the job: the last shard must still be told so
    (else every shard leaves as "done", none ends the job, and it stays running)."""
    first, second = job_frontier("test-job", attempt=1, shard=0), job_frontier("test-job", attempt=1, shard=1)
    first.renew()
    second.renew()
    assert first.try_finish() == "done"
    assert first.renew() == 0  # the lease thread's late tick
    assert second.try_finish() == "last"


def test_release_hands_requests_back_at_once(frontier):
    frontier.renew()
    frontier.push(b"one")
    frontier.pop()
    assert frontier.release() == 1
    assert frontier.pending() == 1


def test_a_reclaimed_shard_takes_nothing_more_into_flight(frontier):
    """A late commit of a shard whose work was reclaimed (a warm shutdown's last commit landing after the next attempt
    started) must not take requests into an in-flight set that nobody reclaims any more."""
    old = job_frontier("test-job", attempt=1, shard=0)
    old.renew()
    old.push(b"one")
    new = job_frontier("test-job", attempt=2, shard=0)
    new.renew()  # attempt 1 is dead from here on
    late = old.commit(requests=[(b"found late", 0, None)], take=5)
    assert late.taken == []
    assert late.pending == 2
    assert sorted(Frontier.payload(member) for member in new.pop(5)) == [b"found late", b"one"]


def test_a_shard_renewing_a_lease_that_ran_out_keeps_its_own_requests(frontier, settings):
    """Renewing says the shard is alive: what it holds stays its own (taken back, it would be fetched twice)."""
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 0.001
    shard = job_frontier("test-job")
    shard.renew()
    shard.push(b"held")
    shard.pop()
    time.sleep(0.05)  # the lease ran out meanwhile (a renewal came late)
    assert shard.renew() == 0
    assert shard.try_finish() == "wait"
    assert (shard.inflight_payloads(), shard.pending()) == ([b"held"], 0)


LEASE_SCRIPT = """
import json, os, sys, time, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from crawls.services.shards import job_frontier
from runtime.bridge.runner import run_spider
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick

url, job, block = sys.argv[1], uuid.uuid4().hex, float(sys.argv[2])
frontier = job_frontier(job)
other = job_frontier(job, shard=1)  # another shard of the job, played from here: it takes back a dead shard's requests
store = storing_tick(frontier)
report = {"reclaimed": 0, "lease_left_ms": [], "held_at_block": 0}
window = []

def hold_reactor():
    window.append(time.monotonic())
    time.sleep(block)  # in the reactor thread: no download, no callback, no timed call runs meanwhile
    window.append(time.monotonic())

def tick(session):
    from twisted.internet import reactor
    if not window and session.crawler is not None and session.crawler.stats.get_value("item_scraped_count", 0) >= 2:
        report["held_at_block"] = len(frontier.inflight_payloads())
        reactor.callFromThread(hold_reactor)
    elif len(window) == 1:  # the reactor is held: every shard's lease is looked at, dead ones reclaimed
        report["reclaimed"] += max(0, other.renew())
        expiry = frontier.redis.zscore(frontier.key("shards"), frontier.member)
        seconds, micros = frontier.redis.time()
        report["lease_left_ms"].append(None if expiry is None else expiry - (seconds * 1000 + micros // 1000))
    return store(session)

crawl, _ = run_spider(
    spider_cls=LinkSpider,
    settings=frontier_crawl_settings(job),
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 12}, "config": {}},
    timeout=90,
    on_tick=tick,
    tick_seconds=0.2,
)
frontier.delete()
pages = crawl.stats.get("response_received_count")
report.update(reason=crawl.finish_reason, held_for=window[1] - window[0], pages=pages)
print(json.dumps(report))
"""


def test_the_lease_is_renewed_while_the_reactor_is_held_past_it(slow_chain, redis_server):
    """A 1-second lease, a reactor held for 3 seconds mid-crawl (as a database stall holding the item queue full, or a
    long callback, would): the lease never runs out, so another shard takes nothing back and no page is fetched twice.
    Renewed by the reactor, the lease ran out and the other shard reclaimed the request in flight."""
    start = 610_000
    pages = [f"/slow/{start + n}" for n in range(13)]
    before = [
        slow_chain.hits[page] for page in pages
    ]  # tests/cluster/test_frontier_leases.py runs this test on this site too
    env = {**os.environ, "REDIS_URL": redis_server, "TRAWL_FRONTIER_LEASE_SECONDS": "1"}
    env["TRAWL_INSTALLATION_ID"] = "frontier-lease-test"
    done = script_run(LEASE_SCRIPT, f"{slow_chain.url}/slow/{start}", "3", env=env)

    assert done.returncode == 0, done.stderr[-3000:]
    report = last_json_line(done)
    print(f"reactor held {report['held_for']:.1f} s; lease left while held (ms): {report['lease_left_ms']}")
    assert report["reason"] == "finished" and report["pages"] == 13
    assert report["held_for"] >= 3 and report["held_at_block"] >= 1  # held past the lease, with a request in flight
    assert len(report["lease_left_ms"]) >= 3  # looked at through the hold (each look waits for the reactor 0.5 s)
    assert all(left is not None and left > 0 for left in report["lease_left_ms"]), report
    assert report["reclaimed"] == 0
    assert [slow_chain.hits[page] - earlier for page, earlier in zip(pages, before, strict=True)] == [1] * 13
