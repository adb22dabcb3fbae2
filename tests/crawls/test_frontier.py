"""The job's frontier in Redis: queue order, the seen-set, in-flight leases, reclaiming, leaving, expiry, deletion."""

from __future__ import annotations

import time

import pytest

from crawls.frontier import FINGERPRINT_BYTES, Frontier, binary_redis, frontier_delete
from crawls.services.shards import stats_sum

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
    # Compact: the seen-set holds the raw bytes, not hex.
    assert binary_redis().smembers(frontier.key("seen")) == {fingerprint}


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


def test_shards_leave_one_by_one_and_the_last_one_knows_it(frontier):
    first, second = Frontier("test-job", attempt=1, shard=0), Frontier("test-job", attempt=1, shard=1)
    first.renew()
    second.renew()
    assert first.try_finish() == "done"
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
    assert client.keys(frontier.key("*")) == [frontier.key("ended").encode()]
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
