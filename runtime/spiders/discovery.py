"""How a spider reports a new source instead of an item: it yields `discovered(url)`.

The record travels like an item (so any spider, built-in or not, can yield it), is set apart from the items before
they are stored, and becomes a source when the job belongs to a source with strategy `discovery` (see
`sources_discover`). Its kind defaults to what the parent's kind finds: a hub finds lists, a sitemap finds products.
Item pipelines must let records with the `_discovered` key through untouched.
"""

from __future__ import annotations

from typing import Any

DISCOVERED = "_discovered"


def discovered(url: str, *, kind: str = "", **extra: Any) -> dict[str, Any]:
    """A record for `url`; `kind` ("list", "product", ...) overrides the parent's default; `extra` is kept as is."""
    return {DISCOVERED: True, "url": url, "kind": kind, **extra}


def is_discovered(data: dict[str, Any]) -> bool:
    return data.get(DISCOVERED) is True
