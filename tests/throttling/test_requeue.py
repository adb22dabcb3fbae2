"""Pages a site refused for overload go back to the frontier with the controller's delay, not to Scrapy's retries."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings
from scrapy import Request
from scrapy.exceptions import DownloadTimeoutError
from scrapy.http import Response
from twisted.internet.error import DNSLookupError

from project.redis import loop_redis_close
from tests.crawler import trawl_crawler
from tests.throttling.buckets_helpers import bench_buckets, flush_throttle_keys
from throttling.adaptive import AdaptiveConfig
from throttling.controller import AdaptiveController
from throttling.requeue import DELAY_META, REQUEUES_META, PoliteRequeueMiddleware

pytestmark = pytest.mark.django_db

CONFIG = AdaptiveConfig()
URL = "http://example.test/page"


@pytest.fixture(autouse=True)
def clean_keys():
    flush_throttle_keys()
    yield
    flush_throttle_keys()


def middleware(*, adaptive: bool = True) -> tuple[PoliteRequeueMiddleware, object]:
    buckets = bench_buckets(rate=10, burst=1, ip_rate=10, ip_burst=1, adaptive=adaptive)
    crawler = trawl_crawler()
    controller = AdaptiveController(buckets=buckets, config=CONFIG)
    return PoliteRequeueMiddleware(controller=controller, redis_url=settings.REDIS_URL, stats=crawler.stats), crawler


def answer(mw: PoliteRequeueMiddleware, request: Request, response_or_error: Response | Exception):
    async def run():
        try:
            if isinstance(response_or_error, Exception):
                return await mw.process_exception(request, response_or_error)
            return await mw.process_response(request, response_or_error)
        finally:
            await loop_redis_close()

    return asyncio.run(run())


def test_a_503_sends_the_page_back_to_the_frontier_for_a_window():
    mw, crawler = middleware()
    again = answer(mw, Request(URL, priority=3), Response(URL, status=503))

    assert isinstance(again, Request) and again.url == URL and again.priority == 3
    assert again.meta[DELAY_META] == CONFIG.window and again.meta[REQUEUES_META] == 1
    assert again.dont_filter, "its fingerprint is in the seen-set already"
    assert crawler.stats.get_value("throttle/requeued") == 1


def test_the_sites_retry_after_and_each_requeue_lengthen_the_wait():
    mw, crawler = middleware()
    refused = Response(URL, status=429, headers={"Retry-After": "20"})
    assert answer(mw, Request(URL), refused).meta[DELAY_META] == 20
    assert crawler.stats.get_value("throttle/requeued_429") == 1, "answered later: the outcome does not count it"
    third = answer(mw, Request(URL, meta={REQUEUES_META: 2}), Response(URL, status=503))
    assert third.meta[DELAY_META] == 4 * CONFIG.window


def test_a_timeout_is_sent_back_but_a_dns_error_is_the_pages_own():
    mw, _ = middleware()
    assert isinstance(answer(mw, Request(URL), DownloadTimeoutError("slow")), Request)
    assert answer(mw, Request(URL), DNSLookupError("no such host")) is None, "Scrapy's retries decide"


def test_after_every_requeue_the_response_goes_on_to_scrapys_retries():
    mw, crawler = middleware()
    refused = Response(URL, status=503)

    assert answer(mw, Request(URL, meta={REQUEUES_META: CONFIG.requeues}), refused) is refused
    assert crawler.stats.get_value("throttle/requeues_exhausted") == 1


def test_pages_answered_for_their_own_reasons_and_rules_with_adaptive_off_are_left_alone():
    mw, _ = middleware()
    missing = Response(URL, status=404)
    assert answer(mw, Request(URL), missing) is missing
    refused = Response(URL, status=503)
    assert answer(mw, Request(URL, meta={"dont_retry": True}), refused) is refused

    fixed, crawler = middleware(adaptive=False)
    assert answer(fixed, Request(URL), refused) is refused, "the configured rate whatever happens: Scrapy retries"
    assert crawler.stats.get_value("throttle/requeued") is None
