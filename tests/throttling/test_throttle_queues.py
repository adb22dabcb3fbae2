"""Requests waiting for their domain's tokens wait in one queue per crawl and domain (throttling/queues.py): one take
and one timer a round for all of them, not a timer each. Against real Redis and the database."""

from __future__ import annotations

import asyncio

import pytest
from scrapy import Request, Spider

from tests.crawler import trawl_crawler
from throttling.middlewares import ThrottleMiddleware

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


def crawled(middleware: ThrottleMiddleware, requests: list[Request]) -> tuple[int, int]:
    """Send `requests` through the middleware at once; (timers the loop was asked for, takes sent to Redis)."""
    timers, takes, take = [0], [0], middleware.buckets.take_async

    async def counted_take(*args, **kwargs):
        takes[0] += 1
        return await take(*args, **kwargs)

    middleware.buckets.take_async = counted_take

    async def crawl():
        loop = asyncio.get_running_loop()
        call_at = loop.call_at

        def counted_call_at(*args, **kwargs):
            timers[0] += 1
            return call_at(*args, **kwargs)

        loop.call_at = counted_call_at  # asyncio.sleep, wait_for and call_later all come here
        await asyncio.gather(*(middleware.process_request(request) for request in requests))
        await middleware.close()

    asyncio.run(crawl())
    return timers[0], takes[0]


def test_requests_waiting_for_tokens_wait_together_one_timer_a_round(rule):
    rule("example.com", rate=4, burst=1, ip_rate=100, ip_burst=100, concurrency=32)
    crawler = trawl_crawler(Spider, {})
    middleware = ThrottleMiddleware.from_crawler(crawler)
    requests = [Request(f"https://www.example.com/{n}") for n in range(16)]

    timers, takes = crawled(middleware, requests)

    stats = crawler.stats
    assert stats.get_value("throttle/requests") == 16 and stats.get_value("throttle/delayed") == 15
    # About 4 s at 4 a second, a take for each token. Each round's take costs a few timers (its Redis call's
    # timeouts, the round's sleep). Each waiting request on a timer of its own, asking again every round, came to
    # 186 timers here (16 + 15 + ... + 1 sleeps besides the takes'); the queue's is about 80.
    assert takes <= 16, f"{takes} takes for 16 tokens: never more than one a token"
    assert timers <= 6 * takes, f"{timers} timers for {takes} takes"
    assert stats.get_value("throttle/waits") >= 15, "each waiting request's rounds still count as its waits"


def test_a_request_dropped_while_it_waits_in_the_queue_leaves_the_others_served(rule):
    rule("example.com", rate=5, burst=1, ip_rate=100, ip_burst=100)
    crawler = trawl_crawler(Spider, {})
    middleware = ThrottleMiddleware.from_crawler(crawler)

    async def crawl():
        tasks = [
            asyncio.ensure_future(middleware.process_request(Request(f"https://www.example.com/{n}"))) for n in range(4)
        ]
        await asyncio.sleep(0.05)
        tasks[2].cancel()  # Scrapy dropped it (its crawl moved on): it must not hold up the queue
        done = await asyncio.gather(*tasks, return_exceptions=True)
        await middleware.close()
        return done

    done = asyncio.run(crawl())

    assert [type(each).__name__ for each in done] == ["NoneType", "NoneType", "CancelledError", "NoneType"]
    assert crawler.stats.get_value("throttle/requests") == 3
