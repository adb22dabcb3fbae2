"""The frontier's compact layout in the real Redis (runtime.frontier.layout, codec, bounded): every Request field Trawl
uses survives the codec and a trip through the queue; the bucketed seen-set never answers a false "seen"; chunks keep
priorities and first-in-first-out; kept-back, reclaimed and released requests come back; a frontier written in the
old layout (a job that resumes after the upgrade) keeps its queue and seen-set (its pickled requests are refused, not
read: runtime.frontier.codec); the per-process sets stay bounded."""

from __future__ import annotations

import os
import pickle
import struct
import time

import pytest
from scrapy import FormRequest, Request, Spider
from scrapy_playwright.page import PageMethod

from crawls.services.shards import job_frontier
from runtime.frontier import FINGERPRINT_BYTES, Frontier, binary_redis, codec
from runtime.frontier.bounded import RecentSet
from runtime.frontier.layout import CHUNK_BYTES

pytestmark = pytest.mark.django_db


class Shop(Spider):
    name = "shop"

    def parse_product(self, response):
        pass

    def failed(self, failure):
        pass


@pytest.fixture
def frontier(settings):
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 30
    front = job_frontier("layout-job", attempt=1, shard=0)
    front.delete()
    front.open()
    front.renew()
    yield front
    front.delete()


def every_field(spider: Spider) -> Request:
    return Request(
        "https://shop.example.org/p/1?q=a%20b",
        method="POST",
        headers={"Referer": "https://shop.example.org/", "X-Token": ["a", "b"]},
        body=b"\x00binary\xff" * 20,
        cookies={"session": "s3cr3t"},
        meta={
            "depth": 3,
            "trawl_depth": 3,
            "playwright": True,
            "render": True,
            "render_wait_for": "#price",
            "playwright_page_methods": [PageMethod("wait_for_selector", "div.price")],
            "dont_retry": True,
        },
        priority=-7,
        callback=spider.parse_product,
        errback=spider.failed,
        dont_filter=True,
        flags=["requeued"],
        cb_kwargs={"sku": "A-1", "n": 2},
        encoding="latin-1",
    )


def same(left: Request, right: Request, spider: Spider | None = None) -> bool:
    def plain(request: Request) -> dict:
        fields = request.to_dict(spider=spider)
        methods = fields["meta"].get("playwright_page_methods")
        if methods:  # PageMethod has no __eq__
            fields["meta"] = {**fields["meta"], "playwright_page_methods": [vars(m) for m in methods]}
        return fields

    return plain(left) == plain(right) and type(left) is type(right)


@pytest.mark.parametrize(
    "make",
    [
        every_field,
        lambda spider: Request("https://example.com/"),
        lambda spider: Request("https://example.com/" + "long/" * 40, headers={"Referer": "https://example.com/"}),
        lambda spider: FormRequest("https://example.com/login", formdata={"user": "u"}, callback=spider.parse_product),
        lambda spider: Request("https://example.com/big", method="PUT", body=os.urandom(200_000)),
    ],
)
def test_every_request_field_trawl_uses_survives_the_codec_and_the_queue(frontier, make):
    spider = Shop()
    request = make(spider)
    payload = codec.encode(request, spider)
    assert same(codec.decode(payload, spider), request, spider)
    assert frontier.push(payload, priority=request.priority, fingerprint=os.urandom(20))
    [member] = frontier.pop()
    back = codec.decode(Frontier.payload(member), spider)
    assert same(back, request, spider) and back.callback == request.callback


def test_a_compact_request_is_a_fraction_of_the_plain_pickle():
    request = Request("https://shop.example.org/category/shoes/product-12345.html", meta={"depth": 4})
    request.headers["Referer"] = "https://shop.example.org/category/shoes/page-3.html"
    plain = pickle.dumps(request.to_dict(), protocol=pickle.HIGHEST_PROTOCOL)
    assert len(codec.encode(request)) * 3 < len(plain)


def test_a_request_queued_as_a_pickle_before_the_codec_is_refused_not_unpickled():
    request = Request("https://example.com/old", meta={"depth": 2}, priority=3)
    legacy = pickle.dumps(request.to_dict(), protocol=pickle.HIGHEST_PROTOCOL)
    for payload in (legacy, b"\x01" + legacy, b"\x07not a request"):
        with pytest.raises(codec.Refused):
            codec.decode(payload)


def test_the_bucketed_seen_set_knows_every_fingerprint_and_no_other(frontier):
    fingerprints = [os.urandom(FINGERPRINT_BYTES) for _ in range(3000)]
    requests = [(b"r", 0, fingerprint) for fingerprint in fingerprints]
    assert all(frontier.commit(requests=requests).queued)
    assert not any(frontier.commit(requests=requests).queued)
    others = [(b"r", 0, os.urandom(FINGERPRINT_BYTES)) for _ in range(3000)]
    assert all(frontier.commit(requests=others).queued)
    assert frontier.pending() == 6000


def test_a_fingerprint_spanning_two_others_of_its_bucket_is_not_seen(frontier):
    # Same bucket (first 12 bits): stored one after the other as "AAAAABBBBBCCCCCDDDDD"; "BBBBBCCCCC" is in that
    # string, across two entries, and is still a page never seen.
    first, second, across = (b"\x00\x01" + rest for rest in (b"AAAAABBBBB", b"CCCCCDDDDD", b"BBBBBCCCCC"))
    assert frontier.push(b"1", fingerprint=first) and frontier.push(b"2", fingerprint=second)
    assert frontier.push(b"3", fingerprint=across)
    assert not frontier.push(b"4", fingerprint=across)
    assert frontier.seen(first) and not frontier.seen(b"\x00\x01" + b"ABBBBBCCCC")


def test_chunks_keep_priorities_and_first_in_first_out_across_many_chunks(frontier):
    per_chunk = CHUNK_BYTES // 101
    names = [f"{i:0100d}".encode() for i in range(per_chunk * 3 + 5)]  # 100-byte payloads: 4 chunks
    frontier.commit(requests=[(name, 0, None) for name in names])
    frontier.commit(requests=[(b"urgent %d" % i, 5, None) for i in range(3)])
    assert len(binary_redis().hkeys(frontier.key("chunkdata"))) == 5
    taken = [Frontier.payload(m) for m in frontier.commit(take=len(names) + 3).taken]
    assert taken == [b"urgent 0", b"urgent 1", b"urgent 2", *names]
    assert frontier.pending() == 0 and not binary_redis().exists(frontier.key("chunkdata"), frontier.key("chunks"))


def test_released_and_reclaimed_requests_go_in_front_of_their_priority(frontier, settings):
    for name in (b"a", b"b", b"c"):
        frontier.push(name)
    frontier.pop(2)
    assert frontier.release() == 2
    frontier.renew()
    assert sorted(Frontier.payload(m) for m in frontier.pop(2)) == [b"a", b"b"], "released: first out again"
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 0.001
    dying = job_frontier("layout-job", attempt=1, shard=1)
    dying.renew()
    [member] = dying.pop()
    assert Frontier.payload(member) == b"c"
    frontier.push(b"d")
    time.sleep(0.05)  # shard 1's lease of 1 ms runs out
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 30
    assert frontier.renew() == 1  # shard 1's lease ran out: its request goes back
    assert [Frontier.payload(m) for m in frontier.pop(2)] == [b"c", b"d"]


def test_a_kept_back_request_waits_in_the_new_layout_and_comes_back_before_its_equals(frontier):
    frontier.commit(requests=[(b"refused", 2, os.urandom(FINGERPRINT_BYTES), 0.05)])
    frontier.commit(requests=[(b"later", 2, None), (b"low", 0, None)])
    first = frontier.commit(take=1)
    assert [Frontier.payload(m) for m in first.taken] == [b"later"] and first.delayed == 1
    while frontier.commit().delayed:  # due after 50 ms, Redis time
        pass
    assert [Frontier.payload(m) for m in frontier.pop(2)] == [b"refused", b"low"]


def test_a_frontier_written_in_the_old_layout_keeps_its_queue_and_seen_set(frontier):
    client = binary_redis()
    old_fingerprint = b"\x05" * FINGERPRINT_BYTES
    old_request = codec.encode(Request("https://example.com/old"))
    legacy = pickle.dumps(Request("https://example.com/legacy").to_dict(), protocol=pickle.HIGHEST_PROTOCOL)
    client.zadd(frontier.key("queue"), {struct.pack(">Q", 1) + legacy: -3, struct.pack(">Q", 2) + old_request: 0})
    client.sadd(frontier.key("seen"), old_fingerprint)
    assert frontier.pending() == 2
    assert not frontier.push(b"again", fingerprint=old_fingerprint), "seen in the old layout"
    frontier.commit(requests=[(b"new urgent", 5, None), (b"new", 0, None)])
    taken = [Frontier.payload(m) for m in frontier.pop(4)]
    assert taken == [b"new urgent", legacy, old_request, b"new"]
    assert codec.decode_dict(taken[2])["url"] == "https://example.com/old"
    with pytest.raises(codec.Refused):  # a pickle, whoever wrote it: never unpickled
        codec.decode_dict(taken[1])
    assert frontier.pending() == 0


def test_a_recent_set_stays_bounded_and_only_forgets():
    known = RecentSet(3)
    for key in "abc":
        known.add(key)
    assert "a" in known  # found: now the most recent
    known.add("d")
    assert len(known) == 3
    assert "b" not in known, "the least recently used went first"
    assert all(key in known for key in "acd")
    assert "z" not in known, "never seen: never reported seen"


def test_a_commit_sent_again_with_its_token_is_applied_once(frontier):
    # A retry after a lost reply (runtime.frontier.patient): the first try was applied, the second must not be.
    batch = {"requests": [(b"a", 0, b"\x07" * FINGERPRINT_BYTES), (b"b", 0, None)], "items": [b"{}"], "take": 1}
    first = frontier.commit(**batch, token=b"token-1")
    again = frontier.commit(**batch, token=b"token-1")
    assert again == first and first.queued == [True, True] and len(first.taken) == 1
    assert frontier.pending() == 1
    assert binary_redis().llen(frontier.mine("wal")) == 1, "the item written ahead once"
    assert frontier.inflight_payloads() == [b"a"]
    assert frontier.commit(**batch, token=b"token-2").queued == [False, True], "a new commit is applied"
    assert frontier.pending() == 1  # "b" (not filtered) queued again, one request taken
