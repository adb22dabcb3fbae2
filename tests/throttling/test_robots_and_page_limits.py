"""robots.txt's Crawl-delay / Request-rate as a ceiling on a domain's rate (throttling/robots.py, buckets.lua) and a
rule's max_pages_per_job (throttling/page_limits.py), against real Redis, a real robots.txt parser and the database."""

from __future__ import annotations

import asyncio
import time

import pytest
from scrapy import Request, Spider
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.robotstxt import ProtegoRobotParser

from project.redis import get_redis
from tests.crawler import trawl_crawler
from tests.throttling.test_throttle_middleware import stat
from throttling.buckets import GRANTED, WAIT
from throttling.middlewares import ThrottleMiddleware
from throttling.page_limits import PageLimitReached
from throttling.robots import RobotsCap, robots_cap
from throttling.services import throttle_buckets, throttle_robots, throttle_update

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


def parser(body: str) -> ProtegoRobotParser:
    return ProtegoRobotParser(body.encode(), None)


def test_the_slowest_of_crawl_delay_and_request_rate_is_the_cap():
    assert robots_cap(parser("User-agent: *\nCrawl-delay: 2\n"), "Trawl") == RobotsCap(rate=0.5, delay=2.0)
    both = robots_cap(parser("User-agent: *\nCrawl-delay: 2\nRequest-rate: 1/5\n"), "Trawl")
    assert both == RobotsCap(rate=0.2, delay=5.0)
    assert robots_cap(parser("User-agent: other\nCrawl-delay: 9\n\nUser-agent: *\nDisallow:\n"), "Trawl") is None


def takes(host: str, count: int):
    buckets, client = throttle_buckets(), get_redis()
    return [buckets.take(client, host=host, egress="e1") for _ in range(count)]


def test_a_robots_cap_lowers_the_rule_to_one_request_per_delay_for_every_worker(
    rule,
    django_capture_on_commit_callbacks,
):
    throttle = rule("example.com", rate=20, burst=10, ip_rate=20, ip_burst=10)
    get_redis().set(throttle_buckets().robots_key("example.com"), RobotsCap(rate=0.5, delay=2.0).as_redis())

    first, second = takes("www.example.com", 2)

    assert first.status == GRANTED and second.status == WAIT
    assert 1.9 <= second.wait <= 2.0, "one request every 2 s, burst 1, whatever the rule's 20/s and burst 10"
    assert throttle_robots(throttle)["robots_delay"] == 2.0

    with django_capture_on_commit_callbacks(execute=True):
        throttle_update(throttle=throttle, obey_crawl_delay=False)
    time.sleep(0.6)  # the bucket the cap kept at one token refills at the rule's 20/s to its burst of 10
    assert [decision.status for decision in takes("shop.example.com", 5)] == [GRANTED] * 5, "the rule ignores it"
    assert "ignored" in throttle_robots(throttle)["robots_reason"]


def test_a_robots_cap_never_raises_a_slower_rule(rule):
    rule("example.com", rate=0.1, burst=1, ip_rate=0.1, ip_burst=1)
    get_redis().set(throttle_buckets().robots_key("example.com"), RobotsCap(rate=0.5, delay=2.0).as_redis())

    first, second = takes("www.example.com", 2)

    assert first.status == GRANTED and second.wait > 9, "the rule's one request per 10 s stays"


def middleware_with_robots(body: str) -> tuple[ThrottleMiddleware, dict]:
    crawler = trawl_crawler(Spider, {"ROBOTSTXT_OBEY": True})
    middleware = ThrottleMiddleware.from_crawler(crawler)
    robots = RobotsTxtMiddleware(crawler)
    robots._parsers["www.example.com"] = parser(body)  # what Scrapy's middleware keeps once it parsed robots.txt
    middleware.limits.robots._middleware = robots
    return middleware, crawler.stats


def test_the_crawl_stores_what_robots_txt_asks_for_and_waits_for_it(rule):
    rule("example.com", rate=20, burst=10, ip_rate=20, ip_burst=10)
    middleware, stats = middleware_with_robots("User-agent: *\nCrawl-delay: 2\n")

    async def crawl():
        await middleware.process_request(Request("https://www.example.com/1"))
        second = asyncio.ensure_future(middleware.process_request(Request("https://www.example.com/2")))
        await asyncio.sleep(1.0)
        pending = not second.done()
        await second
        await middleware.close()
        return pending

    assert asyncio.run(crawl()), "the second page waits for the delay robots.txt asks for"
    assert stat(stats, "robots_delay") == 2.0
    assert RobotsCap.from_redis(get_redis().get(throttle_buckets().robots_key("example.com"))).delay == 2.0
    assert get_redis().ttl(throttle_buckets().robots_key("example.com")) > 3000, "kept for the period, then read again"


def test_a_job_fetches_no_more_of_a_domain_than_its_rules_max_pages_per_job(rule):
    rule("example.com", rate=100, burst=100, ip_rate=100, ip_burst=100, max_pages_per_job=3)
    middleware, stats = middleware_with_robots("User-agent: *\nDisallow:\n")

    async def crawl():
        outcomes = []
        await middleware.process_request(Request("https://www.example.com/robots.txt"))  # not a page
        for number in range(5):
            try:
                outcomes.append(await middleware.process_request(Request(f"https://www.example.com/{number}")))
            except PageLimitReached:
                outcomes.append("dropped")
        await middleware.close()
        return outcomes

    assert asyncio.run(crawl()) == [None, None, None, "dropped", "dropped"]
    assert stat(stats, "page_limit_reached") == 2
    assert stat(stats, "requests") == 4, "robots.txt and three pages took tokens; the dropped pages none"


def test_the_fleets_copy_of_robots_txt_never_replaces_a_fetch_scrapy_has_under_way(settings):
    """Scrapy claims a host (a Deferred its other requests wait on) before it fetches robots.txt. A shared copy that
    arrives after the claim must leave it alone: replacing it hung the waiters and failed the fetch as it landed."""
    from twisted.internet.defer import Deferred

    from project.redis import REDIS_SETTING
    from throttling.robots_shared import SharedRobotsTxtMiddleware

    crawler = trawl_crawler(Spider, {"ROBOTSTXT_OBEY": True, REDIS_SETTING: settings.REDIS_URL})
    crawler.spider = crawler._create_spider("robots")
    middleware = SharedRobotsTxtMiddleware(crawler)
    get_redis().set(middleware._key("http", "site.test"), b"User-agent: *\nDisallow: /private\n")

    async def adopt() -> tuple[bool, object, bool]:
        claim = middleware._parsers["site.test"] = Deferred()  # Scrapy's fetch under way
        await middleware.shared_adopt("http", "site.test")
        claim_kept = middleware._parsers["site.test"] is claim
        await middleware.shared_adopt("http", "other.test")  # unclaimed, no copy: left to Scrapy
        unclaimed = middleware._parsers.get("other.test", "unclaimed")
        del middleware._parsers["site.test"]
        await middleware.shared_adopt("http", "site.test")  # unclaimed: the shared copy is adopted
        return claim_kept, unclaimed, middleware._parsers["site.test"].allowed("http://site.test/private", "Trawl")

    assert asyncio.run(adopt()) == (True, "unclaimed", False)
