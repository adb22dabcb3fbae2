"""runtime/guard/resolver.py: the guard and the connection share one answer per host, and an answer resolved
afresh is judged again before anything connects to it. Against a real DNS server on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest
from twisted.internet.interfaces import IReactorPluggableNameResolver

from runtime.guard import resolver as resolver_module
from runtime.guard.resolver import CheckedNameResolver, CrawlResolver, ResolvingReactor
from tests.security.nameserver import NameServer


@pytest.fixture
def rebinding():
    with NameServer() as server:
        server.rebinding("rebind.test", first="127.0.0.2", then="127.0.0.1")
        yield server


def crawl_resolver(server: NameServer, *, guarded: bool = True) -> CrawlResolver:
    return CrawlResolver(guarded=guarded, allowed=["127.0.0.2/32"], servers=[server.address])


class Receiver:
    """A Twisted IResolutionReceiver (its method names) that records the addresses it is given."""

    def __init__(self) -> None:
        self.addresses: list[str] = []
        self.done = asyncio.get_running_loop().create_future()

    def resolutionBegan(self, resolution) -> None:
        pass

    def addressResolved(self, address) -> None:
        self.addresses.append(address.host)

    def resolutionComplete(self) -> None:
        self.done.set_result(None)


async def connect_lookup(resolver: CrawlResolver, host: str) -> list[str]:
    """What Twisted's HostnameEndpoint would connect to."""
    receiver = Receiver()
    CheckedNameResolver(resolver).resolveHostName(receiver, host, 80)
    await receiver.done
    return receiver.addresses


def test_the_connection_gets_the_answer_the_guard_checked(rebinding):
    async def scenario():
        resolver = crawl_resolver(rebinding)
        checked = await resolver.resolve("rebind.test")
        connected = await connect_lookup(resolver, "REBIND.test")
        return checked, connected

    checked, connected = asyncio.run(scenario())

    assert (checked.addresses, checked.reason, connected) == (("127.0.0.2",), "", ["127.0.0.2"])
    assert rebinding.queries["rebind.test"] == 1


def test_an_expired_answer_is_resolved_and_judged_again_so_a_rebound_name_gets_no_address(rebinding, monkeypatch):
    async def scenario():
        resolver = crawl_resolver(rebinding)
        await resolver.resolve("rebind.test")
        monkeypatch.setattr(resolver_module, "RESOLVE_CACHE_SECONDS", 0.0)
        return await resolver.resolve("rebind.test"), await connect_lookup(resolver, "rebind.test")

    again, connected = asyncio.run(scenario())

    assert "127.0.0.1" in again.reason
    assert connected == []  # nothing to connect to: Twisted fails the download with a DNS lookup error


def test_concurrent_lookups_of_a_host_share_one_query(rebinding):
    async def scenario():
        resolver = crawl_resolver(rebinding)
        return await asyncio.gather(*(resolver.resolve("rebind.test") for _ in range(5)))

    answers = asyncio.run(scenario())

    assert {answer.addresses for answer in answers} == {("127.0.0.2",)}
    assert rebinding.queries["rebind.test"] == 1


def test_unguarded_crawls_resolve_through_the_configured_servers_without_judging(rebinding):
    async def scenario():
        resolver = crawl_resolver(rebinding, guarded=False)
        await resolver.resolve("rebind.test")
        resolver._answers.clear()
        return await connect_lookup(resolver, "rebind.test")

    assert asyncio.run(scenario()) == ["127.0.0.1"]


def test_literals_are_judged_without_a_query(rebinding):
    async def scenario():
        resolver = crawl_resolver(rebinding)
        return await connect_lookup(resolver, "64:ff9b::7f00:1"), await connect_lookup(resolver, "127.0.0.2")

    assert asyncio.run(scenario()) == ([], ["127.0.0.2"])


def test_without_configured_servers_the_system_resolver_answers_and_is_judged():
    async def scenario():
        resolver = CrawlResolver(guarded=True, allowed=["127.0.0.2/32"], servers=[])
        return await resolver.resolve("localhost"), await connect_lookup(resolver, "localhost")

    resolution, connected = asyncio.run(scenario())

    assert resolution.addresses and "private" in resolution.reason  # 127.0.0.1 and/or ::1
    assert connected == []


def test_the_resolving_reactor_is_a_pluggable_resolver_reactor_with_a_fixed_resolver(rebinding):
    reactor = ResolvingReactor(object(), crawl_resolver(rebinding))

    assert IReactorPluggableNameResolver.providedBy(reactor)
    with pytest.raises(RuntimeError):
        reactor.installNameResolver(None)
