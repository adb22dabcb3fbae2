"""The proxy rotation downloader middleware with hand-made requests and responses: rotation, cool-downs, groups, the
database away, proxies stored in the database."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.db import OperationalError
from django.utils import timezone
from scrapy import Request, Spider
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse, Response

from tests.crawler import trawl_crawler
from throttling.models import Proxy
from throttling.proxies import ProxyEntry, ProxyPool, ProxyRotationMiddleware, proxies_load

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


class FakeProxies:
    def __init__(self, *entries: ProxyEntry) -> None:
        self.entries = entries
        self.groups: list[str] = []
        self.cooled: list[str] = []

    def load(self, *, group: str) -> list[ProxyEntry]:
        self.groups.append(group)
        return [ProxyEntry(entry.url, entry.label, entry.cooling_until) for entry in self.entries]

    def cool(self, *, url: str, seconds: float) -> None:
        self.cooled.append(url)


def proxy_middleware(fake: FakeProxies, *, config: dict | None = None, **settings) -> ProxyRotationMiddleware:
    crawler = trawl_crawler(Spider, settings)
    middleware = ProxyRotationMiddleware.from_crawler(crawler)
    middleware.load, middleware.cool = fake.load, fake.cool
    spider = Spider(name="s")
    spider.config = config or {}
    asyncio.run(middleware.spider_opened(spider))
    return middleware


def through(middleware, request: Request) -> Request:
    asyncio.run(middleware.process_request(request))
    return request


def test_requests_rotate_over_proxies_not_cooling_down():
    fake = FakeProxies(
        ProxyEntry("http://p1:8080", "ip-1"),
        ProxyEntry("http://p2:8080", "ip-2"),
        ProxyEntry("http://p3:8080", "ip-3", cooling_until=time.time() + 600),
    )
    middleware = proxy_middleware(fake)

    requests = [through(middleware, Request("http://a.test/")) for _ in range(4)]

    assert {request.meta["proxy"] for request in requests} == {"http://p1:8080", "http://p2:8080"}
    assert all(
        request.meta["trawl_egress"] == {"http://p1:8080": "ip-1", "http://p2:8080": "ip-2"}[request.meta["proxy"]]
        for request in requests
    )


def test_a_blocked_proxy_cools_down_and_the_request_goes_again_through_another():
    fake = FakeProxies(ProxyEntry("http://p1:8080", "ip-1"), ProxyEntry("http://p2:8080", "ip-2"))
    middleware = proxy_middleware(fake)
    request = through(middleware, Request("http://a.test/"))
    first = request.meta["proxy"]

    again = asyncio.run(middleware.process_response(request, Response(request.url, status=403, request=request)))
    again = through(middleware, again)

    assert fake.cooled == [first]
    assert again.meta["proxy"] != first
    assert again.meta["trawl_proxy_rotations"] == 1 and again.dont_filter


def test_a_captcha_page_counts_as_blocked():
    fake = FakeProxies(ProxyEntry("http://p1:8080", "ip-1"), ProxyEntry("http://p2:8080", "ip-2"))
    middleware = proxy_middleware(fake)
    request = through(middleware, Request("http://a.test/"))
    page = HtmlResponse(request.url, body=b'<div class="g-recaptcha"></div>', request=request)

    result = asyncio.run(middleware.process_response(request, page))

    assert isinstance(result, Request)
    assert fake.cooled == [request.meta["proxy"]]


def test_rotation_gives_up_after_a_few_proxies():
    fake = FakeProxies(ProxyEntry("http://p1:8080", "ip-1"), ProxyEntry("http://p2:8080", "ip-2"))
    middleware = proxy_middleware(fake)
    request = through(middleware, Request("http://a.test/", meta={"trawl_proxy_rotations": 2}))
    refused = Response(request.url, status=429, request=request)

    assert asyncio.run(middleware.process_response(request, refused)) is refused


def test_a_proxy_the_spider_chose_is_left_alone():
    middleware = proxy_middleware(FakeProxies(ProxyEntry("http://p1:8080", "ip-1")))

    request = through(middleware, Request("http://a.test/", meta={"proxy": "http://mine:3128"}))
    direct = through(middleware, Request("http://a.test/", meta={"dont_proxy": True}))

    assert request.meta["proxy"] == "http://mine:3128" and "trawl_egress" not in request.meta
    assert "proxy" not in direct.meta


def test_the_proxy_group_comes_from_the_spider_config_else_the_settings():
    by_config, by_setting = FakeProxies(), FakeProxies()

    proxy_middleware(by_config, config={"proxy_group": "residential"}, TRAWL_PROXY_GROUP="datacenter")
    proxy_middleware(by_setting, TRAWL_PROXY_GROUP="datacenter")

    assert by_config.groups == ["residential"]
    assert by_setting.groups == ["datacenter"]


def test_without_proxies_requests_go_direct():
    request = through(proxy_middleware(FakeProxies()), Request("http://a.test/"))

    assert "proxy" not in request.meta


class ProxiesOfARestartingDatabase(FakeProxies):
    """Loads once; then the database restarts: every later read or write raises as Django does then."""

    def load(self, *, group: str) -> list[ProxyEntry]:
        if self.groups:
            raise OperationalError("the connection is lost")
        return super().load(group=group)

    def cool(self, *, url: str, seconds: float) -> None:
        raise OperationalError("the connection is lost")


def test_the_database_away_never_fails_a_request_the_crawl_keeps_its_proxies_and_cool_downs():
    """A request failed by it would count as done in the job's frontier, never fetched (runtime/watch/outages.py)."""
    fake = ProxiesOfARestartingDatabase(ProxyEntry("http://p1:8080", "ip-1"), ProxyEntry("http://p2:8080", "ip-2"))
    middleware = proxy_middleware(fake, TRAWL_PROXY_REFRESH_SECONDS=0)  # every request refreshes the pool

    request = through(middleware, Request("http://a.test/"))
    again = asyncio.run(middleware.process_response(request, Response(request.url, status=403, request=request)))

    assert request.meta["proxy"] in {"http://p1:8080", "http://p2:8080"}
    assert middleware.stats.get_value("proxy/refresh_errors") == 1
    assert isinstance(again, Request) and again.meta["trawl_proxy_rotations"] == 1  # cooled down here all the same
    assert through(middleware, again).meta["proxy"] != request.meta["proxy"]


def test_every_proxy_cooling_down_falls_back_to_the_one_rested_longest():
    pool = ProxyPool([ProxyEntry("a", "a", cooling_until=200), ProxyEntry("b", "b", cooling_until=150)])

    assert pool.pick(now=100).url == "b"


def test_proxies_can_be_switched_off_per_version():
    with pytest.raises(NotConfigured):
        ProxyRotationMiddleware.from_crawler(trawl_crawler(Spider, {"TRAWL_PROXY_ENABLED": False}))


@pytest.mark.django_db(transaction=True)
def test_proxies_and_cool_downs_live_in_the_database():
    Proxy.objects.create(url="http://p1:8080", egress_label="ip-1")
    Proxy.objects.create(url="http://p2:8080", egress_label="ip-2")
    Proxy.objects.create(url="http://p3:8080", egress_label="ip-3", enabled=False)
    Proxy.objects.create(url="http://p4:8080", egress_label="ip-4", group="other")
    middleware = ProxyRotationMiddleware.from_crawler(trawl_crawler(Spider, {}))
    asyncio.run(middleware.spider_opened(Spider(name="s")))
    request = through(middleware, Request("http://a.test/"))

    asyncio.run(middleware.process_response(request, Response(request.url, status=403, request=request)))

    assert {entry.url for entry in middleware.pool.entries} == {"http://p1:8080", "http://p2:8080"}
    cooled = Proxy.objects.get(url=request.meta["proxy"])
    assert cooled.cooling_down_until > timezone.now()


@pytest.mark.django_db(transaction=True)
def test_the_crawls_of_one_process_read_their_proxies_once_a_period_not_once_each():
    """Fifty crawls each reading the database every TRAWL_PROXY_REFRESH_SECONDS opened five connections a second."""
    Proxy.objects.create(url="http://p1:8080", egress_label="ip-1")
    loads = []

    def counted(*, group: str) -> list[ProxyEntry]:
        loads.append(group)
        return proxies_load(group=group)

    async def crawls():
        middlewares = [
            ProxyRotationMiddleware.from_crawler(trawl_crawler(Spider, {"TRAWL_PROXY_REFRESH_SECONDS": 1}))
            for _ in range(20)
        ]
        for middleware in middlewares:
            middleware.load = counted
        await asyncio.gather(*(middleware.spider_opened(Spider(name="s")) for middleware in middlewares))
        started = len(loads)
        await asyncio.sleep(1.1)  # a refresh period later
        requests = [Request("http://a.test/") for _ in middlewares]
        await asyncio.gather(*(m.process_request(r) for m, r in zip(middlewares, requests, strict=True)))
        return started, requests

    started, requests = asyncio.run(crawls())

    assert started == 1, "twenty crawls starting together wait for one read"
    assert len(loads) == 2, "and refresh their pools with one read a period"
    assert all(request.meta["proxy"] == "http://p1:8080" for request in requests)
