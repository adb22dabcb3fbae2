"""What the frontier reads back is data, never code (runtime.frontier.codec, datatags): a payload a packaged version's
child forged in its job's frontier is refused whole, and a crawl resuming from such a frontier refuses it, counts it and
crawls the rest. What a request holds that is not data is not written (the scheduler keeps it in memory)."""

from __future__ import annotations

import json
import os
import pickle
import sys
import zlib

import pytest
from scrapy import Request, Spider
from scrapy_playwright.page import PageMethod

from runtime.frontier import codec
from tests.workers import last_json_line, script_run


class Shop(Spider):
    name = "shop"

    def parse_product(self, response):
        pass


class Hostile:
    """What the issue describes: unpickling it runs code (here: writes `marker`)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran')",))


def forged(compact: dict) -> bytes:
    return codec.JSON + json.dumps(compact).encode()


def test_a_pickle_with_a_hostile_reduce_is_refused_without_running(tmp_path):
    marker = tmp_path / "ran"
    compact = {"u": "https://example.com/", "M": {"x": Hostile(str(marker))}}
    for payload in (
        b"\x01" + pickle.dumps(compact),  # what the codec wrote before
        b"\x02" + zlib.compress(pickle.dumps(compact))[2:-4],
        pickle.dumps({"url": "https://example.com/", "meta": {"x": Hostile(str(marker))}}, protocol=5),
    ):
        with pytest.raises(codec.Refused, match="pickle"):
            codec.decode(payload, Shop())
    assert not marker.exists()


@pytest.mark.parametrize(
    ("compact", "why"),
    [
        ({"u": "https://e.com/", "C": "subprocess.Popen"}, "not a Request class"),
        ({"u": "https://e.com/", "C": "os.system"}, "not a Request class"),
        ({"u": "https://e.com/", "C": "antigravity.Request"}, "not a Request class"),  # never imported to find out
        ({"u": "https://e.com/", "c": "__init__"}, "not a callback name"),
        ({"u": "https://e.com/", "c": "no_such_method"}, "has no method"),
        ({"u": "https://e.com/", "M": {"$x": 1}}, "tag this codec never writes"),
        ({"u": "https://e.com/", "M": {"pm": {"$p": ["screenshot", [], {"path": "/tmp/x"}]}}}, "with a path"),
        ({"u": "https://e.com/", "M": {"pm": {"$p": ["pdf", [], {}]}}}, "is not one a queued request may carry"),
        ({"u": "https://e.com/", "M": {"b": {"$b": "not base64!"}}}, "not base64"),
        ({"u": "https://e.com/", "p": "high"}, "priority is a str"),
        ({"u": "https://e.com/", "M": {"playwright_context_kwargs": {"record_har_path": "/x"}}}, "is never read from"),
        ({"u": "https://e.com/", "zz": 1}, "unknown field"),
        ({"M": {}}, "no URL"),
    ],
)
def test_a_forged_payload_is_refused(compact, why):
    with pytest.raises(codec.Refused, match=why):
        codec.decode(forged(compact), Shop())
    assert "antigravity" not in sys.modules


def test_a_deflated_bomb_and_deep_nesting_are_refused():
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, codec.ZDICT)
    bomb = codec.DEFLATED + packer.compress(b'{"u":"' + b"a" * (codec.MAX_INFLATED + 10)) + packer.flush()
    assert len(bomb) < codec.MAX_PAYLOAD
    with pytest.raises(codec.Refused, match="inflates past"):
        codec.decode(bomb)
    with pytest.raises(codec.Refused):
        codec.decode(codec.JSON + b'{"u":"https://e.com/","M":' + b"[" * 100_000 + b"]" * 100_000 + b"}")


def test_meta_of_data_bytes_tuples_and_other_keys_comes_back_as_it_was():
    meta = {"depth": 2, "raw": b"\x00\xff", "pair": (1, "a"), "by_int": {1: "one"}, "$dollar": [None, 1.5, True]}
    meta["page"] = [PageMethod("wait_for_selector", "div.price", timeout=500)]
    meta["escaped"] = "caf\udce9"  # a str decoded with surrogateescape
    request = Request("https://e.com/", meta=meta, cb_kwargs={"sku": ("A", 1)}, body=os.urandom(64))
    back = codec.decode(codec.encode(request, Shop()), Shop())

    page = back.meta.pop("page")
    meta.pop("page")
    assert back.meta == meta and type(back.meta["pair"]) is tuple
    assert (page[0].method, page[0].args, page[0].kwargs) == ("wait_for_selector", ("div.price",), {"timeout": 500})
    assert (back.url, back.body, back.cb_kwargs) == (request.url, request.body, request.cb_kwargs)


@pytest.mark.parametrize(
    "meta",
    [
        {"x": object()},
        {"x": Hostile("/nowhere")},
        {"pm": PageMethod("screenshot", path="/tmp/shot.png")},
        {"playwright_context_kwargs": {"storage_state": "/home/trawl/state.json"}},
    ],
)
def test_a_request_holding_what_is_not_data_is_not_written(meta):
    with pytest.raises(codec.Unstorable):
        codec.encode(Request("https://e.com/", meta=meta))


RESUME_SCRIPT = """
import json, os, pickle, sys, uuid
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
import django
django.setup()
from scrapy import Request
from crawls.services.shards import job_frontier
from runtime.bridge.runner import run_spider
from runtime.frontier import codec
from runtime.spiders.link import LinkSpider
from tests.runtime.frontier_crawl import frontier_crawl_settings, storing_tick
from tests.runtime.test_frontier_codec import Hostile

site, marker, job = sys.argv[1], sys.argv[2], uuid.uuid4().hex
frontier = job_frontier(job)
frontier.open()
hostile = {"u": f"{site}/product-3.html", "M": {"x": Hostile(marker)}}
frontier.commit(requests=[
    (b"\\x01" + pickle.dumps(hostile), 9, None),  # what a child could write: the old codec's tag
    (pickle.dumps(Request(f"{site}/product-4.html", meta={"x": Hostile(marker)}).to_dict(), 5), 8, None),
    (codec.JSON + json.dumps({"u": f"{site}/product-5.html", "C": "os.system"}).encode(), 7, None),
    (codec.encode(Request(f"{site}/product-2.html")), 6, None),
])
crawl, _ = run_spider(
    spider_cls=LinkSpider,
    settings=frontier_crawl_settings(job),
    spider_kwargs={"url": site, "start_urls": [f"{site}/product-1.html"], "options": {"maxdepth": 0}, "config": {}},
    timeout=60,
    on_tick=storing_tick(frontier),
    tick_seconds=0.2,
)
left = frontier.pending() + len(frontier.inflight_payloads())
frontier.delete()
print(json.dumps({"reason": crawl.finish_reason, "stats": crawl.stats, "left": left}, default=str))
"""


def test_a_crawl_resuming_from_a_forged_frontier_refuses_and_counts_it_and_crawls_the_rest(
    site, redis_server, tmp_path
):
    marker = tmp_path / "ran"
    env = {**os.environ, "REDIS_URL": redis_server, "TRAWL_INSTALLATION_ID": "frontier-codec-test"}
    done = script_run(RESUME_SCRIPT, site.url, str(marker), env=env)

    assert done.returncode == 0, done.stderr
    report = last_json_line(done)
    assert not marker.exists(), "a queued entry's __reduce__ ran in the crawl's process"
    assert report["reason"] == "finished" and report["left"] == 0
    assert report["stats"]["frontier/refused"] == 3
    assert report["stats"]["response_received_count"] == 2  # product-1 (start) and product-2 (queued as data)
