"""Normalizing single values: text without markup or stray whitespace, absolute http(s) URLs."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin, urlsplit

from w3lib.html import remove_tags, replace_entities

WHITESPACE = re.compile(r"\s+")


def text_clean(value: Any) -> str:
    """HTML tags and entities out, runs of whitespace (newlines, nbsp) collapsed to one space, ends trimmed."""
    text = replace_entities(remove_tags(str(value)))
    return WHITESPACE.sub(" ", text).strip()


def url_absolute(value: Any, *, base: str) -> str | None:
    """`value` resolved against `base`; None unless the result is an http(s) URL with a host."""
    text = str(value).strip()
    if not text:
        return None
    resolved = urljoin(base, text) if base else text
    parts = urlsplit(resolved)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return resolved
