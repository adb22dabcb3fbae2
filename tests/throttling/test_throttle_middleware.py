"""The throttle's downloader middleware with hand-made requests and responses, against real Redis (and the database):
waiting for tokens, pauses, blocked domains, egress buckets, live rule changes, Redis away."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.test import override_settings
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response

from project.redis import get_redis
from tests.crawler import trawl_crawler
from throttling.buckets import WAIT
from throttling.middlewares import CrawlClosing, ThrottleMiddleware, egress_of
from throttling.models import DomainThrottle
from throttling.services import throttle_buckets, throttle_update

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


def throttle_middleware(**settings) -> tuple[ThrottleMiddleware, dict]:
    crawler = trawl_crawler(Spider, settings)
    return ThrottleMiddleware.from_crawler(crawler), crawler.stats


def stat(stats, name: str):
    return stats.get_value(f"throttle/{name}", 0)


def test_requests_wait_for_tokens_without_blocking_the_event_loop(rule):
    rule("example.com", rate=5, burst=1, ip_rate=100, ip_burst=100)
    middleware, stats = throttle_middleware()
    ticks = 0

    async def ticker(done: asyncio.Event):
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    async def crawl():
        done = asyncio.Event()
        beat = asyncio.create_task(ticker(done))
        requests = [Request(f"https://www.example.com/{n}") for n in range(4)]
        results = await asyncio.gather(*(middleware.process_request(request) for request in requests))
        done.set()
        await beat
        await middleware.close()
        return results

    assert asyncio.run(crawl()) == [None] * 4  # None: Scrapy goes on to download each one
    assert stat(stats, "requests") == 4
    assert stat(stats, "delayed") == 3, "burst 1: the first goes at once, the other three wait their turn"
    assert stat(stats, "waits") >= 3
    assert stat(stats, "wait_seconds_total") > 0
    # The crawl's delay is wall time with a request waiting, not the sum of the concurrent waits.
    assert 0 < stat(stats, "held_seconds") < stat(stats, "wait_seconds_total")
    # Three tokens at 5/s take about 0.6 s; a loop blocked by a sleeping middleware would not tick meanwhile.
    assert ticks >= 10


def test_requests_that_come_together_take_their_tokens_in_one_call_and_only_what_the_bucket_holds(rule):
    rule("example.com", rate=2, burst=3, ip_rate=100, ip_burst=100)
    middleware, stats = throttle_middleware()
    calls, take = [], middleware.buckets.take_async

    async def counted(client, *, host, egress, tokens=1, **slots):
        decision = await take(client, host=host, egress=egress, tokens=tokens, **slots)
        calls.append((tokens, decision.status, decision.granted))
        return decision

    middleware.buckets.take_async = counted

    async def crawl():
        started = time.monotonic()
        requests = [Request(f"https://www.example.com/{n}") for n in range(5)]
        await asyncio.gather(*(middleware.process_request(request) for request in requests))
        await middleware.close()
        return time.monotonic() - started

    took = asyncio.run(crawl())

    assert calls[0] == (5, "granted", 3), "five requests asked in one call; the burst of 3 let three go"
    assert sum(granted for _, _, granted in calls) == 5 and stat(stats, "requests") == 5
    assert stat(stats, "delayed") == 2
    assert took >= 0.9, "the last two waited for tokens at 2/s: about a second"


def test_a_request_waiting_for_a_token_is_dropped_once_the_crawl_is_stopping(rule):
    rule("example.com", rate=1, burst=1, ip_rate=100, ip_burst=100)
    closing = threading.Event()
    middleware, stats = throttle_middleware()
    middleware.closing = closing.is_set  # what crawl_closing(crawler) says once the engine stops

    async def crawl():
        first = await middleware.process_request(Request("https://www.example.com/1"))  # takes the only token
        waiting = asyncio.ensure_future(middleware.process_request(Request("https://www.example.com/2")))
        await asyncio.sleep(0.05)
        closing.set()  # a cancel stopped the crawl while /2 waited for its token
        with pytest.raises(CrawlClosing):
            await waiting
        await middleware.close()
        return first

    assert asyncio.run(crawl()) is None
    assert (stat(stats, "requests"), stat(stats, "dropped_closing")) == (1, 1), "a cancelled crawl sends no more"


def test_meta_dont_throttle_skips_the_buckets(rule):
    rule("example.com", rate=0, burst=1)
    middleware, stats = throttle_middleware()

    async def crawl():
        for _ in range(3):
            await middleware.process_request(Request("https://example.com/", meta={"dont_throttle": True}))

    asyncio.run(crawl())

    assert stat(stats, "skipped") == 3
    assert stat(stats, "requests") == 0
    assert not get_redis().exists(throttle_buckets().bucket_key("example.com"))


def test_requests_to_a_blocked_domain_are_dropped_and_counted(rule):
    rule("example.com", blocked=True)
    middleware, stats = throttle_middleware()

    async def crawl():
        await middleware.process_request(Request("https://shop.example.com/"))

    with pytest.raises(IgnoreRequest, match="blocked"):
        asyncio.run(crawl())
    assert stat(stats, "blocked") == 1


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_pauses_the_domain_for_every_worker(rule, status):
    rule("example.com", rate=100, burst=100, ip_rate=100, ip_burst=100)
    middleware, stats = throttle_middleware()
    request = Request("https://www.example.com/")
    response = Response(request.url, status=status, headers={"Retry-After": "20"}, request=request)

    asyncio.run(middleware.process_response(request, response))
    elsewhere = throttle_buckets().take(get_redis(), host="api.example.com", egress="another-worker")

    assert stat(stats, "paused") == 1
    assert elsewhere.status == WAIT and elsewhere.wait > 19


def test_a_pause_is_capped_and_needs_a_retry_after(rule):
    rule("example.com", rate=100, burst=100, ip_rate=100, ip_burst=100)
    middleware, stats = throttle_middleware()
    middleware.max_pause = 5
    request = Request("https://example.com/")
    bare_503 = Response(request.url, status=503, request=request)
    huge_429 = Response(request.url, status=429, headers={"Retry-After": "86400"}, request=request)

    asyncio.run(middleware.process_response(request, bare_503))
    assert throttle_buckets().take(get_redis(), host="example.com", egress="x").status != WAIT
    asyncio.run(middleware.process_response(request, huge_429))
    capped = throttle_buckets().take(get_redis(), host="example.com", egress="x")

    assert stat(stats, "paused") == 1
    assert capped.status == WAIT and capped.wait <= 5.01


def test_each_egress_ip_has_its_own_bucket(rule):
    rule("example.com", rate=100, burst=100, ip_rate=0, ip_burst=1)
    middleware, stats = throttle_middleware()

    async def crawl():
        for label in ("proxy-a", "proxy-b", "proxy-c"):
            await middleware.process_request(Request("https://example.com/", meta={"trawl_egress": label}))

    asyncio.run(crawl())

    assert stat(stats, "requests") == 3
    assert stat(stats, "delayed") == 0, "an empty bucket for one egress IP must not hold back another"


def test_the_egress_label_is_the_proxys_label_else_its_host_else_the_workers():
    assert egress_of(Request("http://a.test/", meta={"trawl_egress": "ip-1", "proxy": "http://p:1"}), "w") == "ip-1"
    assert egress_of(Request("http://a.test/", meta={"proxy": "http://user:pw@10.1.2.3:3128"}), "w") == "10.1.2.3"
    assert egress_of(Request("http://a.test/", meta={"proxy": "10.1.2.4:3128"}), "w") == "10.1.2.4"
    assert egress_of(Request("http://a.test/"), "worker-1") == "worker-1"


@pytest.mark.django_db(transaction=True)
def test_a_worker_loads_the_rules_when_redis_has_none():
    DomainThrottle.objects.create(domain="example.com", blocked=True)  # not published: Redis knows nothing yet
    middleware, stats = throttle_middleware()

    async def crawl():
        await middleware.process_request(Request("https://example.com/"))

    with pytest.raises(IgnoreRequest):
        asyncio.run(crawl())
    assert stat(stats, "rules_loaded") == 1
    assert stat(stats, "blocked") == 1


def test_a_rule_raised_while_requests_wait_lets_them_go(rule, django_capture_on_commit_callbacks):
    throttle = rule("example.com", rate=0, burst=1, ip_rate=100, ip_burst=100)
    middleware, stats = throttle_middleware()
    middleware.max_sleep = 0.1
    # As in a worker: the event loop runs in a thread of its own, the admin's save happens elsewhere.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def crawl():
        await asyncio.gather(*(middleware.process_request(Request(f"https://example.com/{n}")) for n in range(3)))

    try:
        crawling = asyncio.run_coroutine_threadsafe(crawl(), loop)
        time.sleep(0.5)
        granted_before = stat(stats, "requests")
        with django_capture_on_commit_callbacks(execute=True):
            throttle_update(throttle=throttle, rate=1000, burst=5)
        crawling.result(timeout=30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    assert granted_before == 1, "rate 0: only the burst of 1 went before the change"
    assert stat(stats, "requests") == 3


@override_settings(TRAWL_THROTTLE_ENABLED=False)
def test_the_throttle_can_be_switched_off_for_the_whole_project():
    with pytest.raises(NotConfigured):
        throttle_middleware()


def test_redis_away_is_waited_out_then_reported_as_trawls_fault_not_the_sites(settings):
    """No answer from Redis: the request waits (TRAWL_INFRA_PATIENCE_SECONDS), then fails as infrastructure, which
    the job turns into a requeue; never a `connection` error charged to the site."""
    import socket

    from project.errors import InfrastructureUnavailable

    with socket.socket() as probe:  # a port nothing listens on: Redis "down"
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    settings.TRAWL_INFRA_PATIENCE_SECONDS = 1
    settings.TRAWL_THROTTLE_MAX_SLEEP = 0.2
    middleware, stats = throttle_middleware()

    started = time.monotonic()
    with pytest.raises(InfrastructureUnavailable):
        asyncio.run(middleware.process_request(Request("https://www.example.com/")))

    assert time.monotonic() - started >= 1  # it waited before giving up
    assert stat(stats, "redis_errors") >= 3
    assert stats.get_value("trawl/infrastructure_errors") == 1
