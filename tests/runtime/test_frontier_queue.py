"""The job's frontier in Redis: queue order, the seen-set, in-flight requests, items written ahead, requests kept
back for a while, expiry and deletion of its keys; stats added up over shards and attempts."""

from __future__ import annotations

import time

import pytest

from crawls.services.shards import job_frontier, stats_sum
from runtime.frontier import FINGERPRINT_BYTES, Frontier, binary_redis, frontier_delete
from tests.runtime import frontier_fixtures

pytestmark = pytest.mark.django_db
frontier = frontier_fixtures.frontier  # a fixture


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
    second = job_frontier("test-job", attempt=2, shard=0)  # the worker was SIGKILLed; the job's next attempt
    second.renew()
    assert second.try_finish() == "wait"
    time.sleep(0.25)
    assert [Frontier.payload(m) for m in second.pop(5)] == [b"page again"]


def test_keys_expire_when_untouched_and_go_when_the_job_ends(frontier):
    frontier.renew()
    frontier.push(b"one")
    frontier.pop()
    client = binary_redis()
    frontier.commit(items=[b"{}"])
    keys = [frontier.key(name) for name in ("queue", "seen", "shards")] + [frontier.inflight, frontier.mine("wal")]
    frontier.push(b"two")
    assert all(0 < client.pttl(key) <= 86400 * 1000 for key in keys if client.exists(key))
    frontier_delete(job_id="test-job", ttl_seconds=3600)
    assert list(client.scan_iter(frontier.key("*"))) == [frontier.key("ended").encode()]
    assert job_frontier("test-job", attempt=1, shard=3).renew() == -1  # a shard starting late does not crawl anew


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
