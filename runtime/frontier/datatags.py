"""A request's meta, cb_kwargs and cookies as JSON, and back: data only, never an object that runs code when read.

JSON has strings, numbers, booleans, null, lists and objects with string keys. What a request also holds is written as
a one-key object whose key starts with `$`: `{"$b": base64}` bytes, `{"$t": [...]}` a tuple, `{"$d": [[k, v], ...]}` a
dict whose keys are not all strings (or one of which starts with `$`), `{"$p": [method, args, kwargs]}`
scrapy-playwright's PageMethod. Anything else is Unstorable when written; anything else read is Refused.

A PageMethod is kept only for the page methods in PAGE_METHODS, never with a `path`: it is applied to the page of
whichever process reads the request, and `screenshot(path=...)`, `pdf(path=...)` or `set_input_files` would read or
write that process's files (a worker's, when the request was written by a packaged version's child).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

# Page methods a queued request may carry: waits and interactions with the page, none that touches a file.
PAGE_METHODS = frozenset(
    {
        "wait_for_selector",
        "wait_for_timeout",
        "wait_for_load_state",
        "wait_for_function",
        "wait_for_url",
        "evaluate",
        "click",
        "dblclick",
        "fill",
        "press",
        "type",
        "hover",
        "focus",
        "check",
        "uncheck",
        "select_option",
        "set_viewport_size",
        "set_extra_http_headers",
        "screenshot",
        "content",
        "title",
    }
)
TAGS = ("$b", "$t", "$d", "$p")


class Unstorable(ValueError):
    """A request holds something that is not data: it cannot be written to the frontier."""


class Refused(ValueError):
    """A payload read from the frontier is not a request written by this codec: it is dropped, never run."""


def to_data(value: Any, *, where: str) -> Any:
    """`value` as JSON-able data (tagged where JSON has no such type). Raises Unstorable."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [to_data(item, where=where) for item in value]
    if isinstance(value, tuple):
        return {"$t": [to_data(item, where=where) for item in value]}
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("$") for key in value):
            return {key: to_data(item, where=f"{where}[{key!r}]") for key, item in value.items()}
        return {"$d": [[to_data(key, where=where), to_data(item, where=where)] for key, item in value.items()]}
    if _is_page_method(value):
        return {"$p": _page_method_data(value, where=where)}
    raise Unstorable(f"{where} holds a {type(value).__name__}, which is not data: it cannot be stored in the frontier")


def from_data(value: Any, *, where: str) -> Any:
    """The value `to_data` wrote. Raises Refused for a tag it does not know or a tagged value that is not one."""
    if isinstance(value, list):
        return [from_data(item, where=where) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and (tag := next(iter(value))) in TAGS:
        return _untag(tag, value[tag], where=where)
    if any(key.startswith("$") for key in value):
        raise Refused(f"{where}: a tag this codec never writes")
    return {key: from_data(item, where=where) for key, item in value.items()}


def _untag(tag: str, body: Any, *, where: str) -> Any:
    if tag == "$b" and isinstance(body, str):
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise Refused(f"{where}: bytes that are not base64") from None
    if tag == "$t" and isinstance(body, list):
        return tuple(from_data(item, where=where) for item in body)
    if tag == "$d" and isinstance(body, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in body):
        try:
            return {from_data(key, where=where): from_data(item, where=where) for key, item in body}
        except TypeError:  # a key that cannot be one (a list)
            raise Refused(f"{where}: a dict key that is not hashable") from None
    if tag == "$p" and isinstance(body, list) and len(body) == 3:
        return _page_method(*body, where=where)
    raise Refused(f"{where}: a {tag} that is not one")


def _is_page_method(value: Any) -> bool:
    cls = type(value)
    return cls.__name__ == "PageMethod" and cls.__module__ == "scrapy_playwright.page"


def _page_method_data(method: Any, *, where: str) -> list[Any]:
    _page_method_check(method.method, method.kwargs, where=where, error=Unstorable)
    return [method.method, to_data(list(method.args), where=where), to_data(method.kwargs, where=where)]


def _page_method(name: Any, args: Any, kwargs: Any, *, where: str) -> Any:
    from scrapy_playwright.page import PageMethod

    _page_method_check(name, kwargs, where=where, error=Refused)
    if not isinstance(args, list):
        raise Refused(f"{where}: a page method's arguments are not a list")
    return PageMethod(name, *from_data(args, where=where), **from_data(kwargs, where=where))


def _page_method_check(name: Any, kwargs: Any, *, where: str, error: type[ValueError]) -> None:
    if not isinstance(name, str) or name not in PAGE_METHODS:
        raise error(f"{where}: page method {str(name)[:40]!r} is not one a queued request may carry")
    if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs) or "path" in kwargs:
        raise error(f"{where}: page method {name!r} with a path or keywords that are not names")
