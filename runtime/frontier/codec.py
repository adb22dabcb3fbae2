"""A queued request as few bytes as it takes, and as data only: what the frontier stores for each page still to fetch.

A request is its `Request.to_dict()` with every field at Scrapy's default dropped and the others under one-letter
keys, written as JSON (runtime.frontier.datatags: meta and cb_kwargs hold data only, bytes, tuples and dicts with
other keys tagged; scrapy-playwright's PageMethod as its name and arguments), then deflated with a preset dictionary
of what such requests repeat (the keys, `https://`, `Referer`, Trawl's meta keys) when that is shorter.

Never pickle: a packaged version's child process may write its job's frontier keys, and the job's next attempt may
run in a worker process with the worker's secrets (a non-packaged version). Reading a payload builds data, a Request
of a class already imported, and callbacks named by string as Scrapy's `request_from_dict` does; anything else is
refused (`Refused`), never run. A request whose meta holds what is not data cannot be written (`Unstorable`): the
scheduler keeps it in memory, not durable, as Scrapy does with a request its disk queue cannot serialize.

The first byte says how the rest is written. Frontiers written before (pickles: tags 0x01, 0x02 and pickle's PROTO
0x80) are refused entry by entry like any payload that is not a request: a job that resumes after the upgrade goes
on without the requests it had queued then, each one counted (`frontier/refused`).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import sys
import zlib
from typing import Any

from scrapy import Request, Spider

from runtime.frontier.datatags import Refused, Unstorable, from_data, to_data

__all__ = ("Refused", "Unstorable", "decode", "decode_dict", "decode_or_refuse", "encode")
logger = logging.getLogger("trawl.frontier")
REFUSED_LOGGED = 10  # refused entries logged one by one per crawl (all are counted in `frontier/refused`)

JSON = b"\x03"  # the compact dict as JSON
DEFLATED = b"\x04"  # the same, deflated with ZDICT
PICKLED_TAGS = (0x01, 0x02, 0x80)  # an earlier Trawl's pickles: refused, never unpickled
# Lua reads each queued request's length from 1 or 3 bytes (runtime.frontier.layout): 23 bits at most.
MAX_PAYLOAD = (1 << 23) - 1
MAX_INFLATED = 4 * MAX_PAYLOAD  # a deflated payload never inflates past this (a payload written to be a bomb)

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
    "_class": ("C", None),
}
LONG_NAMES = {short: name for name, (short, _) in FIELDS.items()}
BINARY_BODY = "B"  # a body that is not ASCII, as base64 ("b": an ASCII body as it is)
# Fields a payload may give only as these types; meta, cookies, cb_kwargs and the rest are checked by datatags.
PLAIN_TYPES = {"url": str, "method": str, "encoding": str, "priority": int, "dont_filter": bool}
# Meta that names the reading process's files (a browser context's HAR or video path, its storage state): never
# written to or read from a frontier, which a packaged version's child may write and a worker process read.
PROCESS_META = frozenset({"playwright_context_kwargs"})


def _preset() -> bytes:
    """What deflate may refer back to before the first byte: a typical compact request and common fragments (later
    bytes are cheaper to refer to, so the commonest come last). Changing it changes DEFLATED's meaning: a new tag."""
    sample = {
        "u": "https://www.example.com/",
        "c": "parse",
        "e": "errback",
        "h": [["Referer", ["https://www.example.com/"]]],
        "M": {"depth": 1, "trawl_depth": 1, "playwright": True, "render": True, "dont_filter": True},
        "p": -1,
        "d": True,
    }
    fragments = b"http://.html.php?id=&page=/index/category/product/item/search?q=Cookie:Content-Type:"
    return fragments + _dumps(sample)


def _dumps(compact: dict[str, Any]) -> bytes:
    # surrogatepass: a str Python holds (a URL decoded with surrogateescape) comes back as it was.
    return json.dumps(compact, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


ZDICT = _preset()


def compact_dict(request: Request, spider: Spider | None = None) -> dict[str, Any]:
    """`request.to_dict()` as data, without the fields at their defaults, the others under their short keys.
    Raises Unstorable for a value that is not data (and ValueError, as Scrapy does, for a callback that is not a
    method of the spider)."""
    compact: dict[str, Any] = {}
    for name, value in request.to_dict(spider=spider).items():
        short, default = FIELDS.get(name, (name, None))
        if name in FIELDS and value == default and name != "url":
            continue
        if name == "headers":
            compact[short] = [[key.decode("latin-1"), [v.decode("latin-1") for v in vs]] for key, vs in value.items()]
        elif name == "body":
            ascii_body = value.isascii()
            compact["b" if ascii_body else BINARY_BODY] = value.decode("ascii") if ascii_body else _b64(value)
        else:
            if name == "meta" and PROCESS_META & set(value):
                raise Unstorable(f"meta {sorted(PROCESS_META & set(value))} cannot be stored in the frontier")
            compact[short] = to_data(value, where=name)
    return compact


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode(request: Request, spider: Spider | None = None) -> bytes:
    """The bytes the frontier stores for `request`. Raises Unstorable for a request that is not data (a meta value
    of another type), ValueError for a callback that is not the spider's method and above MAX_PAYLOAD."""
    try:
        written = _dumps(compact_dict(request, spider))
    except RecursionError:
        raise Unstorable("the request's meta is nested too deep to store") from None
    payload = JSON + written
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT)
    deflated = packer.compress(written) + packer.flush()
    if len(deflated) < len(written):
        payload = DEFLATED + deflated
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"{len(payload)} bytes serialized, more than a queued request may take ({MAX_PAYLOAD})")
    return payload


def decode_dict(payload: bytes) -> dict[str, Any]:
    """The Request.to_dict() a payload stands for. Raises Refused for anything that is not a request written here."""
    body = _body(payload)
    try:
        compact = json.loads(body.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise Refused(f"not a queued request: {type(exc).__name__}") from None
    if not isinstance(compact, dict):
        raise Refused("not a queued request: not an object")
    fields: dict[str, Any] = {}
    for short, value in compact.items():
        name = LONG_NAMES.get(short)
        if short == "b" and isinstance(value, str):
            fields["body"] = value.encode("latin-1", "replace")
        elif short == BINARY_BODY and isinstance(value, str):
            fields["body"] = _unb64(value)
        elif name == "headers":
            fields["headers"] = _headers(value)
        elif name in ("callback", "errback"):
            fields[name] = _method_name(value)
        elif name is None:
            raise Refused(f"not a queued request: unknown field {short[:20]!r}")
        elif name == "meta" and isinstance(value, dict) and PROCESS_META & set(value):
            raise Refused(f"not a queued request: meta {sorted(PROCESS_META & set(value))} is never read from here")
        else:
            fields[name] = _plain(name, from_data(value, where=name))
    if not isinstance(fields.get("url"), str):
        raise Refused("not a queued request: no URL")
    return fields


def _body(payload: bytes) -> bytes:
    tag = payload[:1]
    if tag == JSON:
        return payload[1:]
    if tag == DEFLATED:
        unpacker = zlib.decompressobj(-15, ZDICT)
        try:
            body = unpacker.decompress(payload[1:], MAX_INFLATED + 1)
        except zlib.error as exc:
            raise Refused(f"not a queued request: {exc}") from None
        if len(body) > MAX_INFLATED:
            raise Refused(f"not a queued request: inflates past {MAX_INFLATED} bytes")
        return body
    if tag and tag[0] in PICKLED_TAGS:
        raise Refused("a request queued as a pickle (by an earlier Trawl, or forged): never unpickled")
    raise Refused(f"not a queued request (first byte {tag!r})")


def _unb64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise Refused("not a queued request: its body is not base64") from None


def _headers(value: Any) -> dict[bytes, list[bytes]]:
    if not isinstance(value, list):
        raise Refused("not a queued request: headers are not a list")
    headers: dict[bytes, list[bytes]] = {}
    for entry in value:
        match entry:
            case [str() as key, list() as values] if all(isinstance(v, str) for v in values):
                headers[key.encode("latin-1", "replace")] = [v.encode("latin-1", "replace") for v in values]
            case _:
                raise Refused("not a queued request: a header is not a name and its values")
    return headers


def _method_name(value: Any) -> str:
    """A callback by name, as Scrapy stores it; never a private attribute of the spider."""
    if not isinstance(value, str) or not value.isidentifier() or value.startswith("_"):
        raise Refused(f"not a queued request: {str(value)[:40]!r} is not a callback name")
    return value


def _plain(name: str, value: Any) -> Any:
    wanted = PLAIN_TYPES.get(name)
    if wanted is not None and type(value) is not wanted:
        raise Refused(f"not a queued request: {name} is a {type(value).__name__}")
    return value


def request_class(path: Any) -> type[Request]:
    """The Request subclass a payload names: one already imported (decoding never imports a module) and a subclass
    of Request, like FormRequest or the spider's own."""
    module, _, name = str(path).rpartition(".")
    found = getattr(sys.modules.get(module), name, None) if module else None
    if not (isinstance(found, type) and issubclass(found, Request)):
        raise Refused(f"not a queued request: {str(path)[:80]!r} is not a Request class this process has")
    return found


def decode(payload: bytes, spider: Spider | None = None) -> Request:
    """The request a payload stands for. Raises Refused for a payload that is not one (nothing in it is run)."""
    fields = decode_dict(payload)
    cls = request_class(fields.pop("_class")) if "_class" in fields else Request
    kwargs = {key: value for key, value in fields.items() if key in cls.attributes}
    for name in ("callback", "errback"):
        if kwargs.get(name):
            method = getattr(spider, kwargs[name], None) if spider is not None else None
            if not callable(method):
                raise Refused(f"not a queued request: the spider has no method {kwargs[name]!r}")
            kwargs[name] = method
        else:
            kwargs.pop(name, None)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise Refused(f"not a queued request: {exc}") from None


def decode_or_refuse(payload: bytes, spider: Spider | None, stats: Any) -> Request | None:
    """decode(), or None for a payload refused: counted in the crawl's `frontier/refused`, the first few logged."""
    try:
        return decode(payload, spider)
    except Refused as exc:
        stats.inc_value("frontier/refused")
        if stats.get_value("frontier/refused") <= REFUSED_LOGGED:
            logger.warning("frontier: a queued entry was refused, not crawled: %s", exc)
        return None
