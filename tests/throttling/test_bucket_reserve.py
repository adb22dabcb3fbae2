"""A take with `reserve` takes the next token when it comes within that long: the request sleeps until then and is
sent without asking again, so the next request's wait runs from that token, not from when a busy reactor got round
to sending this one. Never more often than the rule: a reserved token is one of the bucket's, taken ahead."""

from __future__ import annotations

import asyncio
import time

import pytest
from scrapy import Request, Spider

from project.redis import get_redis
from tests.crawler import trawl_crawler
from tests.throttling.buckets_helpers import bench_buckets, most_in_any_window
from throttling.buckets import GRANTED, WAIT
from throttling.middlewares import CrawlClosing, ThrottleMiddleware
from throttling.services import throttle_create, throttle_rules_load

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


def test_the_next_token_is_taken_ahead_only_within_the_reserve():
    buckets = bench_buckets(rate=2, burst=1, ip_rate=1000, ip_burst=1000)
    client = get_redis()

    first = buckets.take(client, host="example.test", egress="e", reserve=1.0)
    second = buckets.take(client, host="example.test", egress="e", reserve=1.0)
    third = buckets.take(client, host="example.test", egress="e", reserve=1.0)
    fourth = buckets.take(client, host="example.test", egress="e", reserve=1.0)
    unreserved = buckets.take(client, host="example.test", egress="e")

    assert (first.status, first.after) == (GRANTED, 0.0)
    assert second.status == GRANTED and 0.45 <= second.after <= 0.5, second  # the token of +0.5 s
    assert third.status == GRANTED and 0.95 <= third.after <= 1.0, third  # +1.0 s: the one after it, not the same
    assert fourth.status == WAIT and 1.4 <= fourth.wait <= 1.5, fourth  # +1.5 s is beyond the reserve: ask again
    assert unreserved.status == WAIT and unreserved.after == 0.0


@pytest.fixture
def rule(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        throttle_create(domain="example.com", rate=4, burst=1, ip_rate=100, ip_burst=100)
    throttle_rules_load()


def test_a_request_sent_late_costs_the_next_one_nothing_and_none_goes_before_its_token(rule):
    crawler = trawl_crawler(Spider, {})
    middleware = ThrottleMiddleware.from_crawler(crawler)
    takes, take = [], middleware.buckets.take_async

    async def counted(client, **kwargs):
        takes.append(kwargs)
        return await take(client, **kwargs)

    middleware.buckets.take_async = counted

    async def crawl():
        sent = []
        for number in range(9):  # one after another, as a crawl's chained pages
            request = Request(f"https://www.example.com/{number}")
            await middleware.process_request(request)
            sent.append(time.monotonic())
            middleware.request_ended(request)  # downloaded: its in-flight slot goes back
            if number % 2:
                time.sleep(0.1)  # the reactor busy elsewhere: this crawl gets round to its next request late
        await middleware.close()
        return sent

    sent = asyncio.run(crawl())

    assert len(takes) == 9, "each request asked once: a token due within max_sleep is taken ahead, not asked again"
    assert crawler.stats.get_value("throttle/requests") == 9
    # The tokens came every 0.25 s from the first: the late ones made up no time, and none went before its token.
    assert most_in_any_window(sent, 1.0) <= 4 + 1
    assert sent[-1] - sent[0] >= 8 * 0.25 - 0.01


def test_a_request_waiting_for_its_reserved_token_is_dropped_once_the_crawl_is_stopping(rule):
    crawler = trawl_crawler(Spider, {})
    middleware = ThrottleMiddleware.from_crawler(crawler)
    closing = asyncio.Event()
    middleware.closing = closing.is_set

    async def crawl():
        await middleware.process_request(Request("https://www.example.com/1"))  # the only token
        waiting = asyncio.ensure_future(middleware.process_request(Request("https://www.example.com/2")))
        await asyncio.sleep(0.05)
        closing.set()
        with pytest.raises(CrawlClosing):
            await waiting
        await middleware.close()

    asyncio.run(crawl())

    assert crawler.stats.get_value("throttle/requests") == 1
    assert crawler.stats.get_value("throttle/dropped_closing") == 1


def test_a_pause_asked_for_while_a_request_sleeps_on_its_token_makes_it_wait_the_pause_out(rule):
    from scrapy.http import Response

    crawler = trawl_crawler(Spider, {})
    middleware = ThrottleMiddleware.from_crawler(crawler)

    async def crawl():
        first = Request("https://www.example.com/1")
        await middleware.process_request(first)  # the only token
        second = asyncio.ensure_future(middleware.process_request(Request("https://www.example.com/2")))
        await asyncio.sleep(0.05)  # /2 took the next token ahead and sleeps until it comes (+0.25 s)
        answer = Response(first.url, status=503, headers={"Retry-After": "1"}, request=first)
        await middleware.process_response(first, answer)
        paused = time.monotonic()
        await second
        sent = time.monotonic()
        await middleware.close()
        return sent - paused

    waited = asyncio.run(crawl())

    assert waited >= 0.95, "the site asked every worker to wait a second: a token taken before that does not count"
    assert crawler.stats.get_value("throttle/paused") == 1
    assert crawler.stats.get_value("throttle/requests") == 2


def sleeping_on_a_reserved_token(middleware, errors_while_asleep: int, errors_after_the_void: int) -> float:
    """/1 takes the only token, /2 the next one ahead (+0.25 s) and sleeps; its site answers `errors_while_asleep`
    errors meanwhile, and `errors_after_the_void` more while /2 sleeps on a second token. Seconds until /2 went."""
    from scrapy.http import Response

    async def crawl():
        first = Request("https://www.example.com/1")
        await middleware.process_request(first)
        started = time.monotonic()
        second = asyncio.ensure_future(middleware.process_request(Request("https://www.example.com/2")))
        await asyncio.sleep(0.05)
        for _ in range(errors_while_asleep):
            await middleware.process_response(first, Response(first.url, status=503, request=first))
        await asyncio.sleep(0.3)  # /2 woke: went, or gave its token up and took the one after (+0.5 s)
        for _ in range(errors_after_the_void):
            await middleware.process_response(first, Response(first.url, status=500, request=first))
        await second
        sent = time.monotonic()
        await middleware.close()
        return sent - started

    return asyncio.run(crawl())


def test_errors_answered_while_a_request_sleeps_on_its_token_void_it_once(rule):
    """The token was taken at the rate the site is refusing (the controller cuts it in a moment): the request asks
    again and goes on the bucket's next token; more errors meanwhile do not void that one (a site that errs on every
    answer is still crawled, at its cut rate)."""
    crawler = trawl_crawler(Spider, {})
    middleware = ThrottleMiddleware.from_crawler(crawler)
    assert middleware.controller is not None, "adaptive politeness is on by default"

    waited = sleeping_on_a_reserved_token(middleware, errors_while_asleep=2, errors_after_the_void=2)

    assert waited >= 0.45, "sent on the bucket's next token, not the one it had taken before the errors"
    assert crawler.stats.get_value("throttle/reserved_void") == 1
    assert crawler.stats.get_value("throttle/requests") == 2


def test_one_stray_error_voids_no_token(rule):
    crawler = trawl_crawler(Spider, {})
    middleware = ThrottleMiddleware.from_crawler(crawler)

    sleeping_on_a_reserved_token(middleware, errors_while_asleep=1, errors_after_the_void=0)

    assert crawler.stats.get_value("throttle/reserved_void") is None, "went on the token it had taken"
    assert crawler.stats.get_value("throttle/requests") == 2
