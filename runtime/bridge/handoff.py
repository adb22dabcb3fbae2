"""How each scraped item reaches Trawl: `ItemHandoff`, the last item pipeline of every crawl, turns it into a plain
dict once and sends it to Trawl's consumers (the job's store, the frontier's write-ahead, field coverage, the stall
watchdog) with one synchronous signal, `item_passed`.

They used to receive `item_scraped` each, but Scrapy runs every receiver of that signal as an asyncio task of its
own and each consumer converted the item again: per item five tasks and three conversions, a few percent of a
CPU-bound crawl's reactor (bench/README.md).
"""

from __future__ import annotations

import json
from typing import Any

from itemadapter import ItemAdapter

# send_catch_log(signal=item_passed, data=<dict>): an item every pipeline of the version let through, as a new dict
# (consumers only read it; it crosses to the task thread).
item_passed = object()
HANDOFF = "runtime.bridge.handoff.ItemHandoff"
# After any pipeline a version declares: an item dropped there never reaches Trawl, as with `item_scraped`.
HANDOFF_ORDER = 10**9
PLAIN_VALUES = frozenset({str, int, float, bool, type(None)})


def with_item_handoff(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with the handoff as the last item pipeline. It goes in ITEM_PIPELINES_BASE, which Scrapy merges
    with ITEM_PIPELINES: a version's or a spider's own ITEM_PIPELINES (`custom_settings` replaces the whole dict) adds
    to it instead of replacing it."""
    declared = settings.get("ITEM_PIPELINES_BASE") or {}
    base = dict(json.loads(declared) if isinstance(declared, str) else declared)  # Scrapy takes JSON there too
    return {**settings, "ITEM_PIPELINES_BASE": {**base, HANDOFF: HANDOFF_ORDER}}


def handoff_missing(crawler: Any) -> bool:
    """True if the crawl's item pipelines are known and the handoff is not among them (a Scrapy whose engine does not
    show them gets the benefit of the doubt)."""
    scraper = getattr(crawler.engine, "scraper", None)
    pipelines = getattr(getattr(scraper, "itemproc", None), "middlewares", None)
    return pipelines is not None and not any(isinstance(pipeline, ItemHandoff) for pipeline in pipelines)


class ItemHandoff:
    def __init__(self, crawler: Any) -> None:
        self.signals = crawler.signals

    @classmethod
    def from_crawler(cls, crawler: Any) -> ItemHandoff:
        return cls(crawler)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        # `spider` for the Scrapy a packaged version may pin: before 2.13 pipelines were always given it.
        self.signals.send_catch_log(signal=item_passed, data=as_plain_dict(item))
        return item


def as_plain_dict(item: Any) -> dict[str, Any]:
    """The item as a new dict. Most items are dicts of plain values, which a copy turns into one as well as
    ItemAdapter does, without asking of every value whether it is an item too (a third of the handoff's time)."""
    if type(item) is dict and all(type(value) in PLAIN_VALUES for value in item.values()):
        return dict(item)
    return ItemAdapter(item).asdict()
