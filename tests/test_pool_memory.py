"""Which crawl of a crawl host grew it past its memory bound (project.pools.memory): the bytes its spider holds."""

from __future__ import annotations

import logging

import pytest

from project.pools import memory
from project.pools.memory import crawl_weighed, memory_suspect, spider_bytes, suspects_find

MIB = 1 << 20


class Crawler:
    def __init__(self) -> None:
        self.settings = {"shared": b"s" * (4 * MIB)}
        self.engine = [b"e" * (4 * MIB)]


class Spider:
    def __init__(self, held: object = None) -> None:
        self.crawler = Crawler()
        self.logger = logging.getLogger("some.spider")
        self.start_urls = ["https://example.com/"]
        if held is not None:
            self.held = held


@pytest.fixture(autouse=True)
def no_decision_left():
    yield
    memory._suspects = None


def test_a_spider_weighs_what_its_attributes_hold_not_its_crawler_nor_shared_objects():
    light, heavy = Spider(), Spider(held={"pages": [b"x" * MIB for _ in range(20)]})
    assert spider_bytes(light) < MIB
    assert 20 * MIB <= spider_bytes(heavy) < 21 * MIB
    assert spider_bytes(None) == 0


def test_the_crawl_holding_the_growth_is_the_suspect_and_its_neighbours_are_not():
    heavy, light = Spider(held=b"x" * (40 * MIB)), Spider()
    with crawl_weighed("job-a:0", lambda: heavy), crawl_weighed("job-b:0", lambda: light):
        assert suspects_find(60 * MIB) == {"job-a:0"}
    assert memory_suspect("job-a:0") and not memory_suspect("job-b:0")


def test_when_no_spider_holds_the_growth_every_crawl_counts_it():
    with crawl_weighed("job-a:0", Spider), crawl_weighed("job-b:0", lambda: None):
        assert suspects_find(400 * MIB) is None
    assert memory_suspect("job-a:0") and memory_suspect("job-b:0")
