"""The http/https download handler of every crawl: Scrapy's HTTP/1.1 handler whose direct connections resolve through
the crawl's own resolver (runtime/guard/resolver.py), so a guarded crawl connects only to addresses its guard
checked, and TRAWL_DNS_SERVERS is honoured. A crawl that needs neither is Scrapy's handler unchanged."""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler, _BindAddressAgent, _ScrapyAgent
from scrapy.crawler import Crawler
from scrapy.exceptions import ResponseDataLossError
from scrapy.http import Response
from scrapy.utils._download_handlers import get_dataloss_msg, normalize_bind_address, wrap_twisted_exceptions
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.web.client import Agent

from runtime.guard.resolver import ResolvingReactor, crawl_resolver

logger = logging.getLogger(__name__)


class _CheckedAgent(_ScrapyAgent):
    """Scrapy's agent, but direct connections go through `reactor` (a ResolvingReactor); proxied ones connect to the
    proxy as Scrapy does (the handler only sends proxied requests elsewhere)."""

    def __init__(self, *, reactor: ResolvingReactor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._checked_reactor = reactor

    def _get_agent(self, request: Request, timeout: float) -> Agent:
        bindaddress = normalize_bind_address(request.meta.get("bindaddress") or self._bindAddress)
        return _BindAddressAgent(
            reactor=self._checked_reactor,
            contextFactory=self._contextFactory,
            connectTimeout=timeout,
            bindAddress=bindaddress,
            pool=self._pool,
        )


class CheckedHTTPDownloadHandler(HTTP11DownloadHandler):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        resolver = crawl_resolver(crawler)
        if resolver is not None:
            from twisted.internet import reactor  # the parent imports it the same way, once running

            self._checked_reactor: ResolvingReactor | None = ResolvingReactor(reactor, resolver)
        else:
            self._checked_reactor = None

    async def download_request(self, request: Request) -> Response:
        if self._checked_reactor is None or request.meta.get("proxy"):
            return await super().download_request(request)
        agent = _CheckedAgent(
            reactor=self._checked_reactor,
            contextFactory=self._contextFactory,
            bindAddress=self._bind_address,
            pool=self._pool,
            maxsize=getattr(self._crawler.spider, "download_maxsize", self._default_maxsize),
            warnsize=getattr(self._crawler.spider, "download_warnsize", self._default_warnsize),
            fail_on_dataloss=self._fail_on_dataloss,
            crawler=self._crawler,
            tls_verbose_logging=self._tls_verbose_logging,
        )
        try:
            with wrap_twisted_exceptions():
                return await maybe_deferred_to_future(agent.download_request(request))
        except ResponseDataLossError:
            if not self._fail_on_dataloss_warned:
                logger.warning(get_dataloss_msg(request.url))
                self._fail_on_dataloss_warned = True
            raise
