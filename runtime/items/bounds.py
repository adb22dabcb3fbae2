"""Bounding the size of every item a crawl hands to Trawl: `ItemBounds`, an item pipeline in every crawl, just before
the handoff (runtime.bridge.handoff).

A page decides what its items hold: a 30 MiB `<title>`, a `selectors` field that is the whole body fifty times, a
2 MiB `attrs` copied into every item. Past the handoff an item is copied into the job's item queue, written ahead to
the frontier in Redis, upserted as JSON, exported to feeds and served by the API: one such item costs each of them.
So an item with a field over TRAWL_ITEM_FIELD_MAX_BYTES, or over TRAWL_ITEM_MAX_BYTES in all, is dropped here, as
Scrapy drops a response over DOWNLOAD_MAXSIZE: counted (`items_dropped` in the job's stats, `items/oversize` and
`item_dropped_reasons_count/ItemTooLarge` in Scrapy's) and logged with its URL, the field and the sizes. Its values
are cut before Scrapy's "Dropped:" line prints the item, so the log line stays small too. Never truncated: a cut
value would be stored as if the page said it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem, NotConfigured

from runtime.bridge.handoff import HANDOFF_ORDER

ITEM_BOUNDS = "runtime.items.bounds.ItemBounds"
ITEM_BOUNDS_ORDER = HANDOFF_ORDER - 1  # after every pipeline a version declares: what it adds is bounded too
FIELD_SETTING, ITEM_SETTING = "TRAWL_ITEM_FIELD_MAX_BYTES", "TRAWL_ITEM_MAX_BYTES"
SCALAR_BYTES = 8  # what a number, a boolean or null counts for
SHOWN_CHARS = 200  # a dropped item's values are cut to this in the log


class ItemTooLarge(DropItem):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        # A WARNING whatever DEFAULT_DROPITEM_LOG_LEVEL says (Scrapy 2.13+ reads it; an older one a package pins
        # logs at its own level).
        self.log_level = "WARNING"


def value_size(value: Any, *, stop_above: int = 0) -> int:
    """About the UTF-8 bytes of `value` as JSON (strings by their UTF-8 length, no quoting or escaping counted),
    nested values walked without recursion. Stops counting once above `stop_above` (when set): an item a hundred
    times over the bound costs no more to refuse than one just over it."""
    total, pending = 0, [value]
    while pending:
        current = pending.pop()
        if isinstance(current, str):
            total += len(current) if current.isascii() else len(current.encode("utf-8", "surrogatepass"))
        elif isinstance(current, bytes | bytearray):
            total += len(current)
        elif isinstance(current, Mapping):
            total += 2
            for key, item in current.items():
                pending.extend((str(key), item))
        elif isinstance(current, list | tuple | set | frozenset):
            total += 2 + len(current)
            pending.extend(current)
        elif current is None or isinstance(current, bool | int | float):
            total += SCALAR_BYTES
        else:
            total += len(str(current))
        if stop_above and total > stop_above:
            break
    return total


def item_oversize(fields: Mapping[str, Any], *, field_max: int, item_max: int) -> str:
    """Why the item is over its bounds ("" when it is not): the first field over `field_max`, else the whole item
    over `item_max` (0: that bound is off)."""
    total = 0
    for name, value in fields.items():
        limit = max(field_max, item_max - total, 1) if item_max else field_max
        size = value_size(value, stop_above=limit)
        if field_max and size > field_max:
            return f"field {name!r} holds more than {field_max} bytes (TRAWL_ITEM_FIELD_MAX_BYTES)"
        total += size + len(str(name))
        if item_max and total > item_max:
            return f"the item holds more than {item_max} bytes (TRAWL_ITEM_MAX_BYTES)"
    return ""


class ItemBounds:
    def __init__(self, *, field_max: int, item_max: int, stats: Any) -> None:
        self.field_max, self.item_max, self.stats = field_max, item_max, stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> ItemBounds:
        field_max, item_max = crawler.settings.getint(FIELD_SETTING), crawler.settings.getint(ITEM_SETTING)
        if not field_max and not item_max:
            raise NotConfigured("no item bounds")
        return cls(field_max=field_max, item_max=item_max, stats=crawler.stats)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        adapter = ItemAdapter(item)
        reason = item_oversize(adapter, field_max=self.field_max, item_max=self.item_max)
        if not reason:
            return item
        self.stats.inc_value("items/oversize")
        url = adapter.get("url")
        where = f"item of {str(url)[:SHOWN_CHARS]}" if isinstance(url, str) else "item"
        _cut(adapter)
        raise ItemTooLarge(f"{where} dropped: {reason}")


def _cut(adapter: ItemAdapter) -> None:
    """Replace every long value by its size, so that Scrapy's "Dropped:" line does not print megabytes."""
    for name in list(adapter.field_names()):
        value = adapter.get(name)
        size = value_size(value, stop_above=SHOWN_CHARS)
        if size > SHOWN_CHARS:
            try:
                adapter[name] = f"<{value_size(value)} bytes, not kept>"
            except (TypeError, AttributeError, KeyError):  # a frozen item type: Scrapy prints it as it is
                return
