"""A running crawl stores its items every STORE_SECONDS, not every tick: a throttled crawl yields an item every half
second, and a transaction for each was most of what it cost. A chunk's worth, and a crawl that waits for its items
(its frontier holds it open until they are stored), are stored at the tick they are seen."""

from __future__ import annotations

import pytest

from crawls.services.ingestion import STORE_SECONDS, STORE_SECONDS_SHARED, ItemIngest
from crawls.services.liveness import CrawlTick
from items.models import Item
from runtime.bridge.runner import _crawls_running_count

pytestmark = pytest.mark.django_db


@pytest.fixture
def tick(running_job):
    from scrapy import Spider

    from runtime.bridge.runner import CrawlSession
    from tests.crawler import trawl_crawler

    crawler = trawl_crawler(Spider)
    crawler._apply_settings()
    tick = CrawlTick(running_job, ingest=ItemIngest(running_job))
    return tick, CrawlSession(crawler=crawler)


def scraped(session, *numbers: int) -> None:
    for number in numbers:
        session.items.put({"url": f"http://shop.test/p/{number}", "title": f"product {number}"})


def stored() -> int:
    return Item.objects.filter(url__startswith="http://shop.test/p/").count()


def test_items_wait_for_the_next_store_then_go_in_one_round(tick):
    tick, session = tick
    scraped(session, 1)
    assert tick(session) == ""
    assert stored() == 0 and session.items.qsize() == 1  # not yet due: the tick only checked the cancel flag

    scraped(session, 2, 3)
    tick.ingest.last_store -= STORE_SECONDS  # as STORE_SECONDS later
    assert tick(session) == ""
    assert stored() == 3 and session.items.qsize() == 0
    assert tick.ingest.item_counts()["items_new"] == 3


def test_a_crawl_waiting_for_its_items_and_a_chunks_worth_are_stored_at_once(tick, settings):
    tick, session = tick
    scraped(session, 1)
    session.store_now = True  # the frontier holds the idle crawl open until its items are stored
    tick(session)
    assert stored() == 1

    session.store_now = False
    scraped(session, *range(2, 2 + settings.TRAWL_ITEM_CHUNK))
    tick(session)
    assert stored() == 1 + settings.TRAWL_ITEM_CHUNK


def test_beside_other_crawls_of_its_process_a_crawl_stores_every_shared_interval(tick):
    """In a crawl host running several crawls their store transactions add up: each stores every
    STORE_SECONDS_SHARED, while a crawl alone in its process keeps STORE_SECONDS (a kill test's items show soon)."""
    tick, session = tick
    _crawls_running_count(+3)  # as run_spider counts the crawls of a crawl host
    try:
        scraped(session, 1)
        tick.ingest.last_store -= STORE_SECONDS
        tick(session)
        assert stored() == 0, "beside other crawls: not yet"
        tick.ingest.last_store -= STORE_SECONDS_SHARED
        tick(session)
        assert stored() == 1
    finally:
        _crawls_running_count(-3)
