"""The job's frontier in Redis: queue order, the seen-set, in-flight leases, reclaiming, leaving, expiry, deletion;
its epoch (a frontier Redis lost is noticed, never rebuilt in part); leases renewed while the reactor is blocked."""

from __future__ import annotations

import os
import time

import pytest

from crawls.frontier import FINGERPRINT_BYTES, Frontier, FrontierEnded, FrontierLost, binary_redis, frontier_delete
from crawls.services.lifecycle import job_claim, job_requeue
from crawls.services.shards import Shard, stats_sum
from tests.workers import last_json_line, script_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def frontier(settings):
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 30
    front = Frontier("test-job", attempt=1, shard=0)
    front.delete()
    yield front
    front.delete()


def test_requests_come_out_most_urgent_first_then_in_order(frontier):
    frontier.renew()
    for name, priority in (("a", 0), ("b", 5), ("c", 0), ("d", 5)):
        assert frontier.push(name.encode(), priority=priority)
    popped = [Frontier.payload(frontier.pop()[0]) for _ in range(2)] + [Frontier.payload(m) for m in frontier.pop(5)]
    assert popped == [b"b", b"d", b"a", b"c"]
    assert frontier.pop() == []


def test_a_seen_fingerprint_is_not_queued_twice_but_unfiltered_requests_are(frontier):
    fingerprint = b"\x01" * FINGERPRINT_BYTES
    assert frontier.push(b"page", fingerprint=fingerprint)
    assert not frontier.push(b"page again", fingerprint=fingerprint)
    assert frontier.push(b"retry", fingerprint=None)
    assert frontier.pending() == 2
    assert frontier.seen(fingerprint)
    # Compact: the seen-set holds the raw bytes, not hex, bucketed by their first 12 bits (the other 10 bytes stored).
    assert binary_redis().hgetall(frontier.key("seenbuckets")) == {b"\x00\x01": b"\x01" * 10}


def test_in_flight_requests_stay_until_acknowledged_and_block_the_end(frontier):
    frontier.renew()
    frontier.push(b"one")
    [member] = frontier.pop()
    assert frontier.pending() == 0
    assert frontier.inflight_payloads() == [b"one"]
    assert frontier.try_finish() == "wait"
    frontier.ack([member])
    frontier.stored(0, progress={"pages": 1})
    assert frontier.try_finish() == "last"
    assert frontier.progress() == {"1:0": {"pages": 1}}


def test_items_written_ahead_hold_the_end_until_they_are_stored(frontier):
    frontier.renew()
    frontier.push(b"page")
    [member] = frontier.pop()
    frontier.commit(items=[b'{"n": 1}', b'{"n": 2}'], done=[member])  # the page is done, its items not stored yet
    assert frontier.try_finish() == "wait"
    frontier.stored(1)
    assert frontier.try_finish() == "wait"
    frontier.stored(1)
    assert frontier.try_finish() == "last"


def test_a_dead_shard_s_unstored_items_are_stored_by_a_live_one(frontier):
    dead = Frontier("test-job", attempt=1, shard=0)
    dead.renew()
    dead.commit(items=[b'{"n": 1}', b'{"n": 2}', b'{"n": 3}'])
    dead.stored(1)  # its task stored the first before it died
    live = Frontier("test-job", attempt=2, shard=0)
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
    second = Frontier("test-job", attempt=2, shard=0)
    assert second.renew() == 1
    assert sorted(Frontier.payload(member) for member in second.pop(2)) == [b"one", b"two"]


def test_a_dead_shard_s_requests_return_when_its_lease_expires(frontier, settings):
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 0.001
    dead = Frontier("test-job", attempt=1, shard=1)
    dead.renew()
    dead.push(b"held")
    dead.pop()
    time.sleep(0.05)
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 30
    live = Frontier("test-job", attempt=1, shard=0)
    assert live.try_finish() == "work"  # the dead shard's request is queued again, for the live one
    live.renew()  # only a shard holding a lease takes requests
    assert [Frontier.payload(member) for member in live.pop()] == [b"held"]


def test_a_request_sent_back_with_a_delay_waits_keeps_the_job_open_and_comes_back_with_its_priority(frontier):
    frontier.renew()
    frontier.push(b"page")
    [member] = frontier.pop()
    committed = frontier.commit(requests=[(b"page again", 7, None, 0.4)], done=[member], take=5)
    assert committed.taken == [] and committed.delayed == 1, "kept back, not handed out at once"
    assert 0 < committed.next_due <= 0.4
    assert frontier.try_finish() == "wait", "a kept-back request is the job's work: the job must not end"
    frontier.push(b"other", priority=0)
    time.sleep(0.45)
    assert frontier.try_finish() == "work"
    taken = [Frontier.payload(m) for m in frontier.pop(5)]
    assert taken == [b"page again", b"other"], "due: back in the queue, before lower priorities"
    assert frontier.commit(take=1).delayed == 0


def test_a_kept_back_request_survives_the_shard_that_sent_it(frontier):
    frontier.renew()
    frontier.push(b"page")
    [member] = frontier.pop()
    frontier.commit(requests=[(b"page again", 0, None, 0.2)], done=[member])
    second = Frontier("test-job", attempt=2, shard=0)  # the worker was SIGKILLed; the job's next attempt
    second.renew()
    assert second.try_finish() == "wait"
    time.sleep(0.25)
    assert [Frontier.payload(m) for m in second.pop(5)] == [b"page again"]


def test_shards_leave_one_by_one_and_the_last_one_knows_it(frontier):
    first, second = Frontier("test-job", attempt=1, shard=0), Frontier("test-job", attempt=1, shard=1)
    first.renew()
    second.renew()
    assert first.try_finish() == "done"
    assert second.try_finish() == "last"


def test_a_shard_renewed_once_more_after_it_left_does_not_keep_the_job_from_ending(frontier):
    """A shard's lease thread can renew just after its crawl left the job: the last shard must still be told so
    (else every shard leaves as "done", none ends the job, and it stays running)."""
    first, second = Frontier("test-job", attempt=1, shard=0), Frontier("test-job", attempt=1, shard=1)
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


def test_keys_expire_when_untouched_and_go_when_the_job_ends(frontier):
    frontier.renew()
    frontier.push(b"one")
    frontier.pop()
    client = binary_redis()
    frontier.commit(items=[b"{}"])
    keys = [frontier.key(name) for name in ("queue", "seen", "shards")] + [frontier.inflight, frontier.mine("wal")]
    frontier.push(b"two")
    assert all(0 < client.pttl(key) <= 86400 * 1000 for key in keys if client.exists(key))
    frontier_delete(job_id="test-job")
    assert list(client.scan_iter(frontier.key("*"))) == [frontier.key("ended").encode()]
    assert Frontier("test-job", attempt=1, shard=3).renew() == -1  # a shard starting late does not crawl anew


def test_stats_add_up_over_shards_and_attempts():
    total = stats_sum(
        [
            {"pages": 3, "status_codes": {"200": 3}, "finish_reason": "finished", "invalid_sample": [1]},
            {"pages": 2, "status_codes": {"200": 1, "404": 1}, "finish_reason": "", "invalid_sample": [2]},
        ]
    )
    assert total == {
        "pages": 5,
        "status_codes": {"200": 4, "404": 1},
        "finish_reason": "finished",
        "invalid_sample": [1, 2],
    }


def test_a_reclaimed_shard_takes_nothing_more_into_flight(frontier):
    """A late commit of a shard whose work was reclaimed (a warm shutdown's last commit landing after the next attempt
    started) must not take requests into an in-flight set that nobody reclaims any more."""
    old = Frontier("test-job", attempt=1, shard=0)
    old.renew()
    old.push(b"one")
    new = Frontier("test-job", attempt=2, shard=0)
    new.renew()  # attempt 1 is dead from here on
    late = old.commit(requests=[(b"found late", 0, None)], take=5)
    assert late.taken == []
    assert late.pending == 2
    assert sorted(Frontier.payload(member) for member in new.pop(5)) == [b"found late", b"one"]


def test_a_shard_renewing_a_lease_that_ran_out_keeps_its_own_requests(frontier, settings):
    """Renewing says the shard is alive: what it holds stays its own (taken back, it would be fetched twice)."""
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 0.001
    shard = Frontier("test-job")
    shard.renew()
    shard.push(b"held")
    shard.pop()
    time.sleep(0.05)  # the lease ran out meanwhile (a renewal came late)
    assert shard.renew() == 0
    assert shard.try_finish() == "wait"
    assert (shard.inflight_payloads(), shard.pending()) == ([b"held"], 0)


def lose(frontier: Frontier) -> None:
    """What Redis emptied (restarted without its data, flushed) does to a job: every key of its frontier gone."""
    client = binary_redis()
    if keys := list(client.scan_iter(frontier.key("*"))):
        client.delete(*keys)


def test_a_frontier_redis_lost_is_noticed_by_every_call_and_none_rebuilds_it(frontier):
    frontier.renew()
    frontier.push(b"one")
    [member] = frontier.pop()
    lose(frontier)

    with pytest.raises(FrontierLost):
        frontier.commit(requests=[(b"found", 0, b"\x01" * FINGERPRINT_BYTES)], items=[b"{}"], done=[member], take=8)
    with pytest.raises(FrontierLost):
        frontier.renew()
    with pytest.raises(FrontierLost):
        frontier.stored(1, progress={"pages": 1})
    assert frontier.try_finish() == "lost"  # never "last": the crawl does not end as if the site were done
    assert frontier.release() == 0
    assert frontier.adopt(10) == []
    assert frontier.lost
    assert list(binary_redis().scan_iter(frontier.key("*"))) == []  # not half a frontier for the next attempt to trust


def test_after_a_loss_only_the_next_attempt_creates_a_fresh_frontier_and_the_old_shards_stay_out(frontier):
    first = frontier.open(create=True)
    other = Frontier("test-job", attempt=1, shard=1)
    assert other.open(create=False) == first  # the other shards join the frontier shard 0 opened
    frontier.renew()
    other.renew()
    frontier.push(b"page", fingerprint=b"\x01" * FINGERPRINT_BYTES)
    lose(frontier)
    binary_redis().sadd(frontier.key("seen"), b"\x02" * FINGERPRINT_BYTES)  # a write that outlived the loss

    with pytest.raises(FrontierLost):  # a shard of the same attempt never recreates it: the others still run
        Frontier("test-job", attempt=1, shard=1).open(create=False)
    fresh = Frontier("test-job", attempt=2, shard=0)
    epoch = fresh.open(create=True)

    assert epoch and epoch != first
    assert fresh.push(b"start", fingerprint=b"\x02" * FINGERPRINT_BYTES)  # what outlived the loss is gone
    with pytest.raises(FrontierLost):  # a shard of the lost frontier writes nothing into the new one
        other.commit(requests=[(b"late", 0, None)], take=1)
    assert other.try_finish() == "lost"
    assert frontier.try_finish() == "lost"
    fresh.renew()
    assert [Frontier.payload(member) for member in fresh.pop(5)] == [b"start"]


def test_a_shard_still_crawling_when_another_ended_the_job_stops_without_writing(frontier):
    frontier.renew()
    frontier.push(b"one")
    frontier_delete(job_id="test-job")  # another shard ended the job (timeout, cancel): its frontier went with it

    with pytest.raises(FrontierEnded):
        frontier.commit(requests=[(b"found", 0, None)], take=8)
    with pytest.raises(FrontierEnded):
        frontier.stored(1, progress={"pages": 1})
    assert frontier.try_finish() == "ended"
    assert frontier.renew() == -1
    assert list(binary_redis().scan_iter(frontier.key("*"))) == [frontier.key("ended").encode()]


def test_a_job_whose_frontier_is_lost_before_its_final_tally_is_requeued_to_a_fresh_frontier(api, builtins, sent_tasks):
    """The shards' side (crawls.services.shards): shard 0 opens the frontier, the others join it; a tally after the
    loss raises (the task then requeues the job, never ends it), a shard joining late never recreates it, and shard 0
    of the next attempt starts a fresh one."""
    response = api.post("/api/jobs/", {"url": "http://shop.test/", "parallelism": 2}, format="json")
    job = job_claim(job_id=response.json()["id"], attempt=1, worker="test")
    first, second = Shard(job, index=0), Shard(job, index=1)
    epoch = first.scrapy_settings()["TRAWL_FRONTIER"]["epoch"]
    assert second.scrapy_settings()["TRAWL_FRONTIER"]["epoch"] == epoch
    first.total({"pages": 3})
    lose(first.frontier)

    with pytest.raises(FrontierLost):
        first.total({"pages": 5}, final=True)  # the last look before the outcome
    with pytest.raises(FrontierLost):
        Shard(job, index=1).scrapy_settings()
    with pytest.raises(FrontierLost):
        first.check_intact({})
    requeued = job_requeue(job=job, reason="FrontierLost", counts_attempt=False)  # what job_execute does with it
    fresh = Shard(requeued, index=0).scrapy_settings()["TRAWL_FRONTIER"]["epoch"]

    assert (requeued.status, requeued.attempt, requeued.max_attempts - requeued.attempt) == ("queued", 2, 2)
    assert fresh and fresh != epoch
    Frontier(job.pk).delete()


def test_a_late_shard_of_an_ended_job_opens_nothing():
    frontier_delete(job_id="ended-job")
    late = Frontier("ended-job", attempt=1, shard=0)
    assert late.open(create=True) == ""
    assert late.renew() == -1
    assert list(binary_redis().scan_iter(late.key("*"))) == [late.key("ended").encode()]
    late.delete()


LEASE_SCRIPT = """
import json, os, sys, time, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from crawls.frontier import Frontier
from crawls.scraping.runner import run_spider
from crawls.scraping.spiders.link import LinkSpider
from tests.crawls.frontier_crawl import frontier_crawl_settings, storing_tick

url, job, block = sys.argv[1], uuid.uuid4().hex, float(sys.argv[2])
frontier = Frontier(job)
other = Frontier(job, shard=1)  # another shard of the job, played from here: it takes back a dead shard's requests
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


@pytest.fixture
def slow_chain(site):
    delay, site.slow_delay = site.slow_delay, 0.3
    yield site
    site.slow_delay = delay


def test_the_lease_is_renewed_while_the_reactor_is_held_past_it(slow_chain, redis_server):
    """A 1-second lease, a reactor held for 3 seconds mid-crawl (as a database stall holding the item queue full, or a
    long callback, would): the lease never runs out, so another shard takes nothing back and no page is fetched twice.
    Renewed by the reactor, the lease ran out and the other shard reclaimed the request in flight."""
    start = 610_000
    pages = [f"/slow/{start + n}" for n in range(13)]
    before = [slow_chain.hits[page] for page in pages]  # tests/cluster/test_frontier.py runs this test on this site too
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


LOSS_SCRIPT = """
import json, os, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from crawls.frontier import Frontier, FrontierLost, binary_redis
from crawls.scraping.runner import run_spider
from crawls.scraping.spiders.link import LinkSpider
from tests.crawls.frontier_crawl import frontier_crawl_settings, storing_tick

url, job = sys.argv[1], uuid.uuid4().hex
frontier, client = Frontier(job), binary_redis()
store = storing_tick(frontier)
state = {"stored": 0, "lost": False}

def tick(session):
    if state["stored"] >= 3 and not state["lost"]:  # Redis emptied under the crawl
        client.delete(*list(client.scan_iter(frontier.key("*"))))
        state["lost"] = True
    try:
        state["stored"] += session.items.qsize()
        store(session)
    except FrontierLost:
        pass  # the task would stop the crawl now; here the crawl is left to notice by itself
    return ""

crawl, _ = run_spider(
    spider_cls=LinkSpider,
    settings=frontier_crawl_settings(job),
    spider_kwargs={"url": url, "start_urls": [url], "options": {"maxdepth": 500}, "config": {}},
    timeout=60,
    on_tick=tick,
    tick_seconds=0.2,
)
left = sorted(key.decode().rsplit(":", 1)[-1] for key in list(client.scan_iter(frontier.key("*"))))
print(json.dumps({"reason": crawl.finish_reason, "lost": crawl.stats.get("frontier/lost"), "left": left,
                  "errors": crawl.stats.get("trawl/infrastructure_errors"),
                  "pages": crawl.stats.get("response_received_count")}))
"""


def test_a_crawl_whose_frontier_redis_lost_stops_by_itself_and_rebuilds_nothing(slow_chain, redis_server):
    """The scheduler notices at its next commit: it sends nothing more (no key of the frontier comes back) and closes
    the spider as `frontier_lost`, with the stats the task reads to requeue the job (crawls.services.execution)."""
    env = {**os.environ, "REDIS_URL": redis_server, "TRAWL_INSTALLATION_ID": "frontier-loss-test"}
    done = script_run(LOSS_SCRIPT, f"{slow_chain.url}/slow/620000", env=env)

    assert done.returncode == 0, done.stderr[-3000:]
    report = last_json_line(done)
    assert (report["reason"], report["lost"]) == ("frontier_lost", 1), report
    assert report["errors"] >= 1 and report["left"] == []
    assert report["pages"] < 100  # stopped within a few pages of the loss, not at the end of the 500-page chain
