"""One resolution for the guard's check and the connection (no DNS-rebinding window).

A guarded crawl's private-target guard (runtime/guard/guard.py) and its http/https connections ask the same
per-crawl `CrawlResolver`: the guard's answer is kept for RESOLVE_CACHE_SECONDS and the connection is made to those
very addresses; an answer resolved afresh (the cache expired) is judged again before anything connects to it, so a
connection only ever goes to an address that was checked. Scrapy's DNS_RESOLVER cannot do this: it is installed
reactor-wide by CrawlerProcess only, and Trawl runs guarded and unguarded crawls side by side in one reactor — so the
resolver is plugged into each crawl's download handler instead (`CheckedHTTPDownloadHandler`).

TRAWL_DNS_SERVERS ("ip[:port]" list) points every crawl at given DNS servers; empty is the system resolver. A request
sent through a proxy connects to the proxy (admin-configured, `throttling.Proxy`), which resolves the target itself:
the guard still checks the target's name, but what the proxy connects to is the proxy's business.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from typing import Any

from scrapy.crawler import Crawler
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IHostnameResolver, IReactorPluggableNameResolver, IResolutionReceiver
from zope.interface import implementer

from project.net import Resolution, parse_address, parse_networks, resolve_checked
from project.net.dns_servers import parse_servers

logger = logging.getLogger(__name__)

RESOLVE_CACHE_SECONDS = 30.0
CACHE_PRUNE_AT = 1024  # hosts remembered before expired answers are dropped

_crawl_resolvers: weakref.WeakKeyDictionary[Crawler, CrawlResolver | None] = weakref.WeakKeyDictionary()


class CrawlResolver:
    """Resolves and judges hosts for one crawl; concurrent lookups of a host share one resolution."""

    def __init__(self, *, guarded: bool, allowed: list[str], servers: list[str]) -> None:
        self.guarded = guarded
        self.allowed = parse_networks(tuple(allowed)) if guarded else ()
        self.servers = parse_servers(servers)
        self._answers: dict[str, tuple[float, asyncio.Future[Resolution]]] = {}

    async def resolve(self, host: str) -> Resolution:
        host = _ascii_host(host)  # the guard sees "xn--…", Twisted's endpoint the Unicode form: one entry for both
        now = time.monotonic()
        cached = self._answers.get(host)
        if cached is None or now - cached[0] >= RESOLVE_CACHE_SECONDS:
            if len(self._answers) >= CACHE_PRUNE_AT:
                self._prune(now)
            lookup = functools.partial(self._resolve_now, host)
            cached = (now, asyncio.get_running_loop().run_in_executor(None, lookup))
            self._answers[host] = cached
        return await asyncio.shield(cached[1])  # a cancelled download must not cancel others' answer

    def _resolve_now(self, host: str) -> Resolution:
        try:
            resolution = resolve_checked(host, allowed=self.allowed, servers=self.servers)
        except Exception:  # a resolver bug must not pass for an answer: the host then resolves to nothing
            logger.exception("resolving %r failed", host)
            return Resolution(host=host, addresses=(), refused=())
        if self.guarded:
            return resolution
        # Unguarded crawls (admins, scheduled work, `make run`) may go anywhere the name leads.
        return Resolution(host=host, addresses=resolution.addresses, refused=())

    def _prune(self, now: float) -> None:
        for host, (created, _) in list(self._answers.items()):
            if now - created >= RESOLVE_CACHE_SECONDS:
                del self._answers[host]


def _ascii_host(host: str) -> str:
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return host.lower()


def crawl_resolver(crawler: Crawler) -> CrawlResolver | None:
    """The crawl's resolver, shared by the guard and the download handler; None when the crawl needs none (not
    guarded and no TRAWL_DNS_SERVERS: Scrapy's own connections then, exactly as without Trawl)."""
    if crawler not in _crawl_resolvers:
        settings = crawler.settings
        guarded = settings.getbool("TRAWL_GUARD_PRIVATE_TARGETS")
        servers = settings.getlist("TRAWL_DNS_SERVERS")
        allowed = settings.getlist("TRAWL_PRIVATE_TARGETS_ALLOWED")
        _crawl_resolvers[crawler] = (
            CrawlResolver(guarded=guarded, allowed=allowed, servers=servers) if (guarded or servers) else None
        )
    return _crawl_resolvers[crawler]


class _Resolving:
    """An in-progress resolution (IHostResolution); a started lookup is not cancellable."""

    def __init__(self, name: str) -> None:
        self.name = name

    def cancel(self) -> None:
        pass


@implementer(IHostnameResolver)
class CheckedNameResolver:
    """Twisted's view of a CrawlResolver: a refused host resolves to nothing, so nothing connects."""

    def __init__(self, resolver: CrawlResolver) -> None:
        self.resolver = resolver

    def resolveHostName(  # Twisted's names: IHostnameResolver
        self,
        resolutionReceiver: IResolutionReceiver,
        hostName: str,
        portNumber: int = 0,
        addressTypes: Any = None,
        transportSemantics: str = "TCP",
    ) -> _Resolving:
        resolution = _Resolving(hostName)
        resolutionReceiver.resolutionBegan(resolution)
        future = asyncio.ensure_future(self.resolver.resolve(hostName))
        deferred: Deferred[Resolution] = Deferred.fromFuture(future)
        deferred.addCallback(self._deliver, resolutionReceiver, portNumber, addressTypes)
        deferred.addErrback(lambda _failure: None)
        deferred.addBoth(lambda _: resolutionReceiver.resolutionComplete())
        return resolution

    @staticmethod
    def _deliver(resolution: Resolution, receiver: IResolutionReceiver, port: int, types: Any) -> None:
        if resolution.reason:
            return
        for address in resolution.addresses:
            kind = IPv6Address if parse_address(address).version == 6 else IPv4Address
            if types is None or kind in types:
                receiver.addressResolved(kind("TCP", address, port))


@implementer(IReactorPluggableNameResolver)
class ResolvingReactor:
    """The reactor, but its name resolver is the crawl's: what Twisted's HostnameEndpoint connects through."""

    def __init__(self, reactor: Any, resolver: CrawlResolver) -> None:
        self._reactor = reactor
        self.nameResolver = CheckedNameResolver(resolver)

    def installNameResolver(self, resolver: IHostnameResolver) -> IHostnameResolver:
        raise RuntimeError("a crawl's resolver is fixed for the crawl")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reactor, name)
