"""The user-agent rotation downloader middleware with hand-made requests."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import NotConfigured

from tests.crawler import trawl_crawler
from throttling.middlewares import UserAgentRotationMiddleware

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]


def ua_middleware(settings: dict, options: dict | None = None) -> UserAgentRotationMiddleware:
    middleware = UserAgentRotationMiddleware.from_crawler(trawl_crawler(Spider, settings))
    spider = Spider(name="s")
    spider.options = options or {}
    middleware.spider_opened(spider)
    return middleware


def user_agent(middleware, request: Request | None = None) -> str:
    request = request or Request("http://a.test/")
    middleware.process_request(request)
    return request.headers.get(b"User-Agent", b"").decode()


def test_user_agents_rotate_per_request():
    middleware = ua_middleware({"TRAWL_USER_AGENTS": ["ua-1", "ua-2", "ua-3"]})

    assert [user_agent(middleware) for _ in range(4)] == ["ua-1", "ua-2", "ua-3", "ua-1"]


def test_a_jobs_useragent_option_pins_it():
    middleware = ua_middleware({"TRAWL_USER_AGENTS": ["ua-1", "ua-2"]}, options={"useragent": "job-agent"})

    assert user_agent(middleware) == ""  # left to Scrapy's UserAgentMiddleware, which sends USER_AGENT (the job's)


def test_a_spiders_own_header_is_kept():
    middleware = ua_middleware({"TRAWL_USER_AGENTS": ["ua-1"]})

    assert user_agent(middleware, Request("http://a.test/", headers={"User-Agent": "mine"})) == "mine"


def test_no_rotation_without_a_list():
    with pytest.raises(NotConfigured):
        ua_middleware({})
