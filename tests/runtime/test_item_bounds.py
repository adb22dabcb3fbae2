"""Item size bounds (runtime/items/bounds.py): what counts, what is dropped, what the log line and stats say."""

from __future__ import annotations

import pytest
from scrapy import Item
from scrapy.item import Field
from scrapy.utils.test import get_crawler

from runtime.items.bounds import ItemBounds, ItemTooLarge, item_oversize, value_size
from runtime.settings.enforced import ALWAYS


def bounds(**settings) -> ItemBounds:
    crawler = get_crawler(settings_dict={"TRAWL_ITEM_FIELD_MAX_BYTES": 100, "TRAWL_ITEM_MAX_BYTES": 250, **settings})
    return ItemBounds.from_crawler(crawler)


def test_sizes_count_utf8_bytes_and_nested_values():
    assert value_size("abc") == 3
    assert value_size("é") == 2
    assert value_size(b"\x00" * 10) == 10
    assert value_size({"k": ["ab", "cd"]}) == 2 + 1 + 2 + 2 + 2 + 2
    assert value_size(12) == value_size(None) == 8


def test_a_deeply_nested_value_is_measured_without_recursion():
    value: list = []
    for _ in range(100_000):
        value = [value]

    assert value_size(value) > 100_000


def test_counting_stops_once_above_the_bound():
    assert 100 < value_size(["x" * 600] * 10_000, stop_above=100) < 10_000 + 2 * 600


def test_the_first_oversize_field_is_named_then_the_whole_item():
    assert item_oversize({"t": "x" * 100}, field_max=100, item_max=250) == ""
    assert "'t'" in item_oversize({"u": "ok", "t": "x" * 101}, field_max=100, item_max=250)
    assert "TRAWL_ITEM_MAX_BYTES" in item_oversize({f"f{n}": "x" * 90 for n in range(3)}, field_max=100, item_max=250)
    assert item_oversize({"t": "x" * 10**6}, field_max=0, item_max=0) == ""


def test_an_item_within_bounds_passes_as_it_is():
    item = {"url": "http://shop.test/", "title": "x" * 100}

    assert bounds().process_item(item) is item


def test_an_oversize_item_is_dropped_counted_and_cut_before_scrapy_logs_it():
    pipeline = bounds()
    item = {"url": "http://shop.test/big", "title": "x" * 10_000, "price": "9.99"}

    with pytest.raises(ItemTooLarge) as dropped:
        pipeline.process_item(item)

    assert "http://shop.test/big" in str(dropped.value) and "'title'" in str(dropped.value)
    assert dropped.value.log_level == "WARNING"  # whatever a version's DEFAULT_DROPITEM_LOG_LEVEL
    assert pipeline.stats.get_value("items/oversize") == 1
    # Scrapy prints the item after "Dropped:": it holds the sizes, not the values.
    assert item == {"url": "http://shop.test/big", "title": "<10000 bytes, not kept>", "price": "9.99"}


def test_scrapy_item_types_are_bounded_too():
    class Product(Item):
        url = Field()
        name = Field()

    with pytest.raises(ItemTooLarge):
        bounds().process_item(Product(url="http://shop.test/", name="n" * 101))


def test_it_is_in_every_crawls_pipelines_just_before_the_handoff():
    """After every pipeline a version declares; only the job's item budget (which counts what the bounds let through)
    stands between it and the handoff."""
    pipelines = ALWAYS["ITEM_PIPELINES"]
    ordered = sorted(pipelines, key=pipelines.get)

    assert ordered[-3:] == [
        "runtime.items.bounds.ItemBounds",
        "runtime.watch.budget.ItemBudget",
        "runtime.bridge.handoff.ItemHandoff",
    ]


def test_off_when_both_bounds_are_zero():
    from scrapy.exceptions import NotConfigured

    with pytest.raises(NotConfigured):
        bounds(TRAWL_ITEM_FIELD_MAX_BYTES=0, TRAWL_ITEM_MAX_BYTES=0)


def test_the_knobs_reach_every_crawl(settings):
    from runtime.settings.compose import with_trawl_defaults

    settings.TRAWL_ITEM_FIELD_MAX_BYTES = 123
    composed = with_trawl_defaults({"TRAWL_ITEM_MAX_BYTES": 456})

    assert composed["TRAWL_ITEM_FIELD_MAX_BYTES"] == 123 and composed["TRAWL_ITEM_MAX_BYTES"] == 456
