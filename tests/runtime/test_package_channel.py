"""A package child's message channel, read by the worker (runtime.packaged.channel): whatever the child writes, the
worker holds a bounded number of bytes of it and creates a bounded number of loggers for it."""

from __future__ import annotations

import io
import json
import logging
import os
import threading

from runtime.packaged import channel
from runtime.packaged.channel import Inbox, channel_read
from runtime.packaged.run import _relog


def test_a_line_too_long_is_skipped_as_it_is_read_and_counted(monkeypatch):
    monkeypatch.setattr(channel, "MAX_LINE_BYTES", 1000)
    lines = [b'{"t": "one"}\n', b'{"t": "' + b"x" * 5000 + b'"}\n', b"not json\n", b"[1]\n", b'{"t": "two"}\n']
    inbox = Inbox()
    channel_read(io.BufferedReader(io.BytesIO(b"".join(lines)), buffer_size=64), inbox, who="test")

    assert [inbox.get(timeout=0)["t"], inbox.get(timeout=0)["t"], inbox.get(timeout=0)] == ["one", "two", None]
    assert inbox.dropped == 3


def test_the_reader_waits_while_the_inbox_is_full_and_never_once_it_is_abandoned():
    read, write = os.pipe()
    inbox = Inbox(max_bytes=10_000)
    reader = threading.Thread(target=lambda: channel_read(os.fdopen(read, "rb"), inbox, who="test"), daemon=True)
    reader.start()
    message = (json.dumps({"t": "log", "d": "y" * 900}) + "\n").encode()
    sent = threading.Event()

    def flood():
        with os.fdopen(write, "wb") as out:
            for _ in range(2000):  # ~1.9 MB: past the inbox and the pipe's buffer, so the writer blocks
                out.write(message)
            out.flush()
        sent.set()

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    assert not sent.wait(2.0), "the child's writes did not wait for the worker"
    assert inbox.size <= 10_000 + len(message)
    assert inbox.get(timeout=5)["t"] == "log"  # reading frees room: the reader goes on
    inbox.abandon()  # the child is being stopped: what it still sends is dropped, nobody waits
    assert sent.wait(30) and writer.join(5) is None
    reader.join(30)
    assert not reader.is_alive() and inbox.size == 0 and inbox.dropped > 0


def test_a_child_names_a_bounded_number_of_loggers(monkeypatch, caplog):
    monkeypatch.setattr(channel, "_logger_names", set())
    before = len(logging.root.manager.loggerDict)
    with caplog.at_level(logging.INFO, logger="trawl.package"):
        for n in range(channel.LOGGER_NAMES_MAX + 500):
            _relog({"name": f"spider{n}", "levelno": 20, "msg": f"record {n}"})
        _relog({"name": "a b\nforged 2026-01-01T00:00:00Z ERROR trawl.jobs", "levelno": 20, "msg": "odd"})

    created = len(logging.root.manager.loggerDict) - before
    assert created <= channel.LOGGER_NAMES_MAX + 1
    assert [r.name for r in caplog.records[:2]] == ["trawl.package.spider0", "trawl.package.spider1"]
    assert {r.name for r in caplog.records[channel.LOGGER_NAMES_MAX :]} == {"trawl.package"}
    assert caplog.records[-1].getMessage() == "odd" and len(caplog.records) == channel.LOGGER_NAMES_MAX + 501
