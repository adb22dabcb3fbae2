"""A queued request as few bytes as it takes: what the frontier stores for each page still to fetch.

A request is its `Request.to_dict()` with every field at Scrapy's default dropped and the others under one-letter
keys, pickled (meta may hold objects, e.g. scrapy-playwright's PageMethod), then deflated with a preset dictionary of
what such pickles repeat (the keys, `https://`, `Referer`, Trawl's meta keys) when that is shorter. A link queued
with its Referer and depth takes ~70 bytes instead of ~400 for the plain pickle (bench/frontier_memory.py).

The first byte says how the rest is written. A plain pickle (what frontiers written before this codec hold) begins
with pickle's PROTO opcode 0x80, which no tag here uses, so `decode` reads both: a job that resumes after an upgrade
keeps its queue.
"""

from __future__ import annotations

import pickle
import zlib
from typing import Any

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict

PICKLED = b"\x01"  # the compact dict, pickled
DEFLATED = b"\x02"  # the same, deflated with ZDICT
LEGACY = 0x80  # a plain pickle of Request.to_dict(): the layout before this codec
# Lua reads each queued request's length from 1 or 3 bytes (runtime.frontier.layout): 23 bits at most.
MAX_PAYLOAD = (1 << 23) - 1

# to_dict() field -> (short key, Scrapy's default: a field equal to it is not stored).
FIELDS: dict[str, tuple[str, Any]] = {
    "url": ("u", None),
    "callback": ("c", None),
    "errback": ("e", None),
    "headers": ("h", {}),
    "method": ("m", "GET"),
    "body": ("b", b""),
    "cookies": ("k", {}),
    "meta": ("M", {}),
    "encoding": ("n", "utf-8"),
    "priority": ("p", 0),
    "dont_filter": ("d", False),
    "flags": ("f", []),
    "cb_kwargs": ("a", {}),
}
LONG_NAMES = {short: name for name, (short, _) in FIELDS.items()}


def _preset() -> bytes:
    """What deflate may refer back to before the first byte: a typical compact pickle and common fragments (later
    bytes are cheaper to refer to, so the commonest come last). Changing it changes DEFLATED's meaning: a new tag."""
    sample = {
        "u": "https://www.example.com/",
        "c": "parse",
        "e": "errback",
        "h": {b"Referer": [b"https://www.example.com/"]},
        "M": {"depth": 1, "trawl_depth": 1, "playwright": True, "render": True, "dont_filter": True},
        "p": -1,
        "d": True,
        "f": [],
        "a": {},
    }
    fragments = b"http://.html.php?id=&page=/index/category/product/item/search?q=Cookie:Content-Type:"
    return fragments + pickle.dumps(sample, protocol=pickle.HIGHEST_PROTOCOL)


ZDICT = _preset()


def compact_dict(request: Request, spider: Spider | None = None) -> dict[str, Any]:
    """`request.to_dict()` without the fields at their defaults, the others under their short keys."""
    compact: dict[str, Any] = {}
    for name, value in request.to_dict(spider=spider).items():
        short, default = FIELDS.get(name, (name, None))
        if name in FIELDS and value == default and name != "url":
            continue
        compact[short] = list(value) if name == "flags" else value
    return compact


def encode(request: Request, spider: Spider | None = None) -> bytes:
    """The bytes the frontier stores for `request`. Raises what pickle raises for a request it cannot serialize
    (an unpicklable meta value, a callback that is not the spider's method), and ValueError above MAX_PAYLOAD."""
    pickled = pickle.dumps(compact_dict(request, spider), protocol=pickle.HIGHEST_PROTOCOL)
    payload = PICKLED + pickled
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT)
    deflated = packer.compress(pickled) + packer.flush()
    if len(deflated) < len(pickled):
        payload = DEFLATED + deflated
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"{len(payload)} bytes serialized, more than a queued request may take ({MAX_PAYLOAD})")
    return payload


def decode_dict(payload: bytes) -> dict[str, Any]:
    """The Request.to_dict() a payload stands for (a legacy plain pickle as it is)."""
    if payload[0] == LEGACY:
        return pickle.loads(payload)
    if payload[:1] == DEFLATED:
        unpacker = zlib.decompressobj(-15, ZDICT)
        body = unpacker.decompress(payload[1:]) + unpacker.flush()
    elif payload[:1] == PICKLED:
        body = payload[1:]
    else:
        raise ValueError(f"not a queued request (first byte {payload[:1]!r})")
    compact = pickle.loads(body)
    return {LONG_NAMES.get(key, key): value for key, value in compact.items()}


def decode(payload: bytes, spider: Spider | None = None) -> Request:
    return request_from_dict(decode_dict(payload), spider=spider)
