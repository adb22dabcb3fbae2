"""Record and replay's parts: a response recorded as WARC comes back byte for byte (compressed bodies too), the
recording stays within its bound, the child's audit hook refuses Internet sockets, the diff names fields and items."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from runtime.replay.diff import items_diff
from runtime.replay.record import Recording, recording_parts
from runtime.replay.result import replay_result_checked
from runtime.replay.serve import RecordedResponses, responses_of
from tests.crawler import trawl_crawler
from tests.workers import BASE_DIR


def response(url: str, body: bytes, **headers: str) -> Response:
    return Response(url, status=200, body=body, headers=headers, request=Request(url))


def test_a_recorded_response_is_served_again_as_it_came_compressed_bodies_too():
    recording = Recording(max_bytes=10**6, max_items=10)
    packed = gzip.compress(b"<html>price 12</html>")
    recording.add_response(
        Request("http://shop.test/a"), response("http://shop.test/a", packed, **{"Content-Encoding": "gzip"})
    )
    crawler = trawl_crawler()
    crawler.stats.open_spider()
    server = RecordedResponses(responses_of(recording.warc()), crawler.stats)

    served = server.process_request(Request("http://shop.test/a"))

    assert served.body == packed and served.headers[b"Content-Encoding"] == b"gzip" and served.status == 200
    with pytest.raises(IgnoreRequest):
        server.process_request(Request("http://shop.test/not-recorded"))
    assert crawler.stats.get_value("replay/not_recorded") == 1


def test_a_recording_stops_at_its_bound_and_says_so():
    recording = Recording(max_bytes=3000, max_items=1)
    for n in range(50):
        body = bytes(range(256)) * 4 + str(n).encode()  # incompressible enough
        recording.add_response(Request(f"http://shop.test/{n}"), response(f"http://shop.test/{n}", body))
    recording.add_item({"id": 1})
    recording.add_item({"id": 2})

    assert recording.truncated and len(recording.warc()) <= 3000
    assert 0 < recording.responses == len(responses_of(recording.warc())) < 50
    assert recording.items == [{"id": 1}]


def test_the_childs_audit_hook_refuses_internet_sockets_and_notes_them():
    probe = (
        "import socket, sys; from runtime.replay import child; sys.addaudithook(child.refuse_network)\n"
        "try:\n    socket.socket().connect(('127.0.0.1', 9))\nexcept OSError as exc:\n    print('refused', exc)\n"
        "try:\n    socket.getaddrinfo('example.com', 80)\nexcept OSError:\n    print('refused lookup')\n"
        "a, b = socket.socketpair(); a.send(b'x'); print('pipe', b.recv(1)); print(len(child.attempts))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=BASE_DIR, capture_output=True, text=True, check=True)

    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused a replay opens no socket (socket.connect")
    assert lines[1:] == ["refused lookup", "pipe b'x'", "2"]


def test_the_diff_names_each_field_on_the_items_it_differs_and_missing_or_extra_items():
    recorded = [{"url": "u1", "price": "1", "_seen": 1}, {"url": "u2", "price": "2"}, {"url": "u3", "price": "3"}]
    replayed = [{"url": "u1", "price": "1", "_seen": 2}, {"url": "u2", "price": "9", "title": "x"}, {"url": "u4"}]

    report = items_diff(recorded, replayed)

    assert not report["clean"]
    assert {name: found["items"] for name, found in report["fields"].items()} == {"price": 1, "title": 1}
    assert report["fields"]["price"]["examples"] == [{"item": "url:u2", "recorded": "2", "replayed": "9"}]
    assert (report["missing"], report["extra"]) == (["url:u3"], ["url:u4"])
    assert report["summary"] == (
        "price differs on 1 of 3 item(s); title differs on 1 of 3 item(s); 1 recorded item(s) missing; "
        "1 item(s) not in the recording"
    )
    assert items_diff(recorded, recorded)["clean"]


def test_the_replays_child_gets_none_of_trawls_secrets_in_its_environment(monkeypatch):
    from crawls.replays.runs import _child_env

    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CELERY_BROKER_URL", "SENTRY_DSN", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "secret")

    env = _child_env()

    assert "secret" not in env.values()
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONHASHSEED", "PYTHONPATH"}


def test_a_packaged_childs_recording_crosses_in_parts_and_only_what_fits_is_kept():
    made = Recording(max_bytes=10**6, max_items=10)
    for n in range(3):
        made.add_response(Request(f"http://shop.test/{n}"), response(f"http://shop.test/{n}", b"x" * 100))
    received = Recording(max_bytes=10**6, max_items=10)
    for part in recording_parts(made):
        received.add_part(part)
    small = Recording(max_bytes=10, max_items=10)
    small.add_part(next(recording_parts(made)))
    hostile = Recording(max_bytes=10**6, max_items=10)
    hostile.add_part({"part": "not base64!", "responses": 10**9})

    assert received.warc() == made.warc() and received.responses == 3 and not received.truncated
    assert set(responses_of(received.warc())) == {("GET", f"http://shop.test/{n}") for n in range(3)}
    assert (small.warc(), small.responses, small.truncated) == (b"", 0, True)
    assert (hostile.warc(), hostile.responses, hostile.truncated) == (b"", 0, True)


def test_a_replays_report_is_checked_field_by_field():
    good = {"items": [{"url": "u"}], "pages": 1, "network": [], "errors": ["e" * 5000], "seconds": 0.5}

    checked = replay_result_checked(good)

    assert checked["items"] == [{"url": "u"}] and checked["pages"] == 1 and len(checked["errors"][0]) == 1000
    for bad in ([], {"items": "x"}, {"items": [1]}, {"items": [], "pages": -1}, {"items": [], "network": "x"}):
        with pytest.raises(ValueError):
            replay_result_checked(bad)
