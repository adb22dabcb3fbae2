"""Cluster-wide in-flight slots per domain, against real Redis: the take counts them across holders (processes),
each request gives its slot back as it ends, a holder renews its lease while it holds slots, and a holder that
died (renewing nothing) loses them when its lease passes."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from django.test import override_settings
from scrapy import Request, Spider, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from project.redis import get_redis
from tests.crawler import trawl_crawler
from throttling.buckets import GRANTED, WAIT, Limits, TokenBuckets
from throttling.middlewares import ThrottleMiddleware
from throttling.services import throttle_buckets, throttle_create, throttle_rules_load, throttle_update
from throttling.slots import RETURN_GATHER_SECONDS, SlotLedger

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttle_keys_clean")]

FAST = {"rate": 1000, "burst": 1000, "ip_rate": 1000, "ip_burst": 1000}  # tokens never run out: only slots bind


@pytest.fixture
def rule(django_capture_on_commit_callbacks):
    def create(domain: str, **fields):
        with django_capture_on_commit_callbacks(execute=True):
            throttle = throttle_create(domain=domain, **{**FAST, **fields})
        throttle_rules_load()
        return throttle

    return create


def take(holder: str, *, host: str = "www.example.com", tokens: int = 1, lease: float = 30.0):
    buckets = throttle_buckets()
    buckets.slot_lease = lease
    return buckets.take(get_redis(), host=host, egress="w", tokens=tokens, holder=holder)


def held(domain: str = "example.com") -> dict[str, int]:
    raw = get_redis().hgetall(throttle_buckets().slots_key(domain))
    return {holder: int(value.split()[0]) for holder, value in raw.items()}


async def held_once(settled, timeout: float = 10.0) -> dict[str, int]:
    """The slots held once `settled(held)` is true (returns go together a moment later: RETURN_GATHER_SECONDS), or as
    they are when `timeout` ran out."""
    deadline = time.monotonic() + timeout
    while not settled(now := held()) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return now


def test_slots_are_counted_across_holders_and_a_full_domain_waits(rule):
    rule("example.com", concurrency=3)

    first, second = take("a", tokens=2), take("b", tokens=5)
    refused = take("c")

    assert (first.status, first.granted) == (GRANTED, 2)
    assert (second.status, second.granted) == (GRANTED, 1), "only one slot was left of three"
    assert (refused.status, refused.busy) == (WAIT, True) and refused.wait > 0
    assert held() == {"a": 2, "b": 1}


def test_without_a_holder_the_take_counts_no_slots(rule):
    rule("example.com", concurrency=1)

    assert all(take("").status == GRANTED for _ in range(5))
    assert held() == {}


def test_the_defaults_limit_domains_without_a_rule(settings):
    settings.TRAWL_THROTTLE_DEFAULTS = {**FAST, "concurrency": 2}
    throttle_rules_load()

    assert take("a", host="unruled.test", tokens=3).granted == 2
    assert take("b", host="unruled.test").busy


def test_a_rule_change_applies_to_the_next_take(rule, django_capture_on_commit_callbacks):
    throttle = rule("example.com", concurrency=1)
    take("a")
    assert take("b").busy

    with django_capture_on_commit_callbacks(execute=True):
        throttle_update(throttle=throttle, concurrency=2)

    assert take("b").status == GRANTED
    assert Limits.from_redis(get_redis().get(throttle_buckets().rule_key("example.com"))).concurrency == 2


def test_an_exact_host_rule_has_its_own_slots(rule):
    rule("example.com", concurrency=1)
    rule("api.example.com", concurrency=1)

    assert take("a", host="www.example.com").status == GRANTED
    assert take("a", host="api.example.com").status == GRANTED, "the host's slots are not the domain's"
    assert held("api.example.com") == {"a": 1} and held("example.com") == {"a": 1}


def test_a_dead_holders_slots_come_back_when_its_lease_passes(rule):
    rule("example.com", concurrency=2)
    assert take("dead", tokens=2, lease=0.5).granted == 2  # then its process is killed: it never renews
    assert take("alive").busy

    deadline = time.monotonic() + 30
    while (decision := take("alive")).busy and time.monotonic() < deadline:
        time.sleep(0.1)

    assert decision.status == GRANTED
    assert held() == {"alive": 1}, "the dead holder's entry was removed"


def crawler_middleware(**settings) -> tuple[ThrottleMiddleware, object]:
    crawler = trawl_crawler(Spider, settings)
    return ThrottleMiddleware.from_crawler(crawler), crawler


def test_each_request_gives_its_slot_back_however_it_ends(rule):
    rule("example.com", concurrency=4)
    middleware, crawler = crawler_middleware()

    async def crawl():
        requests = [Request(f"https://www.example.com/{n}") for n in range(4)]
        for request in requests:
            await middleware.process_request(request)
        full = dict(held())
        await middleware.process_response(requests[0], Response(requests[0].url))  # a response
        await middleware.process_exception(requests[1], IgnoreRequest())  # dropped by a later middleware
        crawler.signals.send_catch_log(signals.request_left_downloader, request=requests[2], spider=None)
        await middleware.process_response(requests[2], Response(requests[2].url))  # after leaving: no second return
        after = await held_once(lambda now: sum(now.values()) <= 1)
        await asyncio.sleep(RETURN_GATHER_SECONDS)  # nothing more goes back
        after = after, dict(held())
        await middleware.close()  # the crawl ends with requests[3] still held
        return full, after

    full, after = asyncio.run(crawl())

    assert list(full.values()) == [4]
    assert [list(counts.values()) for counts in after] == [[1], [1]], "three requests ended, each gave back one slot"
    assert held() == {}, "closing gave back what was still held"


def test_a_request_waits_for_a_slot_without_blocking_the_loop_then_goes(rule):
    rule("example.com", concurrency=1)
    middleware, crawler = crawler_middleware()

    async def crawl():
        first, second = Request("https://www.example.com/1"), Request("https://www.example.com/2")
        await middleware.process_request(first)
        waiting = asyncio.ensure_future(middleware.process_request(second))
        ticks = 0
        for _ in range(10):
            await asyncio.sleep(0.02)
            ticks += 1
        still_waiting = not waiting.done()
        await middleware.process_response(first, Response(first.url))
        await asyncio.wait_for(waiting, timeout=30)
        await middleware.close()
        return still_waiting, ticks

    still_waiting, ticks = asyncio.run(crawl())

    assert still_waiting and ticks == 10, "the second request waited while the loop kept running"
    assert crawler.stats.get_value("throttle/slot_waits", 0) >= 1
    assert crawler.stats.get_value("throttle/requests") == 2


@override_settings(TRAWL_THROTTLE_SLOT_LEASE=0.6)
def test_a_live_holder_renews_its_lease_while_it_holds_slots(rule):
    rule("example.com", concurrency=1)
    middleware, _ = crawler_middleware()

    async def crawl():
        await middleware.process_request(Request("https://www.example.com/long-download"))
        await asyncio.sleep(2.0)  # more than three leases: renewed every lease / 3
        other = take("other")
        await middleware.close()
        return other

    assert asyncio.run(crawl()).busy, "the slot of a request still in flight was kept"
    assert take("other").status == GRANTED


def test_the_same_request_sent_twice_holds_one_slot(rule):
    rule("example.com", concurrency=2)
    middleware, _ = crawler_middleware()

    async def crawl():
        request = Request("https://www.example.com/again")
        await middleware.process_request(request)
        await middleware.process_request(request)  # rescheduled as is by some middleware
        now = await held_once(lambda now: sum(now.values()) <= 1)  # the first slot goes back a moment later
        await middleware.process_response(request, Response(request.url))
        after = await held_once(lambda now: not now)
        await middleware.close()
        return now, after

    now, after = asyncio.run(crawl())

    assert list(now.values()) == [1] and after == {}


def test_a_holder_whose_entry_was_lost_counts_again_at_its_next_renewal(rule):
    rule("example.com", concurrency=4)
    middleware, _ = crawler_middleware()

    async def crawl():
        await middleware.process_request(Request("https://www.example.com/1"))
        await middleware.process_request(Request("https://www.example.com/2"))
        get_redis().delete(throttle_buckets().slots_key("example.com"))  # Redis emptied (a restart, a flush)
        await middleware.process_request(Request("https://www.example.com/3"))
        lost = dict(held())
        await middleware.slots.renew()
        back = dict(held())
        await middleware.close()
        return lost, back

    lost, back = asyncio.run(crawl())

    assert list(lost.values()) == [1], "after the flush Redis knew only of the request sent since"
    assert list(back.values()) == [3], "the renewal counts every request still in flight again"


def test_a_count_a_lost_reply_left_in_redis_is_put_right_at_the_next_renewal(rule):
    """A take Redis ran but whose reply never came back (a timeout under load; or redis-py sending it again) counts
    slots for the holder that no request holds: without the renewal's correction they stay taken while it lives."""
    rule("example.com", concurrency=4)
    middleware, _ = crawler_middleware()

    async def crawl():
        request = Request("https://www.example.com/1")
        await middleware.process_request(request)
        take(middleware.slots.holder, tokens=3)  # granted in Redis; its reply lost on the way
        drifted = dict(held())
        await middleware.slots.renew()
        renewed = dict(held())
        await middleware.process_response(request, Response(request.url))
        ended = await held_once(lambda now: not now)
        await middleware.close()
        return drifted, renewed, ended

    drifted, renewed, ended = asyncio.run(crawl())

    assert list(drifted.values()) == [4]
    assert list(renewed.values()) == [1], "the holder counts the one request it holds, not the lost grant"
    assert ended == {}


def test_a_release_whose_reply_was_lost_is_not_sent_again(rule, monkeypatch):
    """A release Redis ran but whose reply never came back: sent again (alone or with the next take), it would free a
    slot twice and let one request too many through until the next renewal."""
    rule("example.com", concurrency=4)
    middleware, _ = crawler_middleware()
    script, lost = SlotLedger._script, []

    async def reply_lost(self, domain: str, mode: str, count: int) -> int:
        answer = await script(self, domain, mode, count)
        if mode == "release" and not lost:
            lost.append(count)
            raise redis.TimeoutError("Timeout reading from socket")  # after Redis ran it
        return answer

    monkeypatch.setattr(SlotLedger, "_script", reply_lost)

    async def crawl():
        first, second, third = (Request(f"https://www.example.com/{n}") for n in range(3))
        await middleware.process_request(first)
        await middleware.process_request(second)
        await middleware.process_response(first, Response(first.url))  # goes alone a moment later: its reply lost
        released = await held_once(lambda now: sum(now.values()) <= 1)
        await asyncio.gather(*middleware.slots._tasks)  # the send met its error: its count is wherever it stays
        await middleware.process_request(third)  # a take that would carry the release again
        after = dict(held())
        await middleware.close()
        return released, after

    released, after = asyncio.run(crawl())

    assert lost == [1] and list(released.values()) == [1]
    assert list(after.values()) == [2], "second and third hold a slot each: the lost release was not sent twice"


@pytest.mark.parametrize("renewing", [False, True], ids=["", "renewing-all-along"])
def test_many_holders_at_once_never_pass_the_limit(rule, renewing):
    """Six crawl processes' middlewares (six holders) sending 40 requests each at once, some answered, some dropped
    by a later middleware: counted between taking the slot and giving it back, never more than `concurrency`. Also
    while every holder renews (setting its count in Redis) over and over: a renewal never counts a take or a
    release under way wrongly."""
    rule("example.com", concurrency=4)
    middlewares = [crawler_middleware()[0] for _ in range(6)]
    state = {"open": 0, "most": 0, "done": 0, "renewals": 0}

    async def renew_all_along() -> None:
        while state["done"] < 240:
            for middleware in middlewares:
                await middleware.slots.renew()
                state["renewals"] += 1
            await asyncio.sleep(0.001)

    async def one(middleware: ThrottleMiddleware, n: int) -> None:
        request = Request(f"https://www.example.com/{id(middleware)}/{n}")
        await middleware.process_request(request)
        state["open"] += 1
        state["most"] = max(state["most"], state["open"])
        await asyncio.sleep(0.002 * (n % 7))
        state["open"] -= 1
        if n % 5:
            await middleware.process_response(request, Response(request.url))
        else:
            await middleware.process_exception(request, IgnoreRequest())
        state["done"] += 1

    async def crawl():
        renewer = asyncio.get_running_loop().create_task(renew_all_along()) if renewing else None
        await asyncio.gather(*(one(middleware, n) for middleware in middlewares for n in range(40)))
        if renewer is not None:
            await renewer
        for middleware in middlewares:
            await middleware.close()

    asyncio.run(crawl())

    assert state["done"] == 240 and 1 < state["most"] <= 4, state
    assert held() == {}
    assert (state["renewals"] > 100) == renewing


def test_a_slot_given_back_rides_with_the_next_take_or_goes_alone_a_moment_later(rule, monkeypatch):
    """At a few requests a second a request's end and the next take were a script call each: the slot now goes back
    in that take; with no take coming, in a call of its own within RETURN_GATHER_SECONDS."""
    rule("example.com", concurrency=4)
    middleware, _ = crawler_middleware()
    alone, script = [], SlotLedger._script

    async def counted(self, domain: str, mode: str, count: int) -> int:
        alone.append((mode, count))
        return await script(self, domain, mode, count)

    monkeypatch.setattr(SlotLedger, "_script", counted)

    async def crawl():
        first, second = Request("https://www.example.com/1"), Request("https://www.example.com/2")
        await middleware.process_request(first)
        await middleware.process_response(first, Response(first.url))
        await middleware.process_request(second)  # its take gives back first's slot
        carried = dict(held())
        await middleware.process_response(second, Response(second.url))
        returned = await held_once(lambda now: not now)
        await middleware.close()
        return carried, returned

    carried, returned = asyncio.run(crawl())

    assert list(carried.values()) == [1], "one slot held: second's"
    assert returned == {}
    assert alone == [("release", 1), ("drop", 0)], "first's slot went with the take; second's alone, then the close"


def test_while_every_slot_is_held_a_slot_goes_back_alone_at_once(rule, monkeypatch):
    """A domain whose every slot is held: a slot riding with this holder's next take would be this holder's again in
    the same call, before another holder waiting for one could ask. It goes back in a call of its own, at once."""
    rule("example.com", concurrency=1)
    middleware, _ = crawler_middleware()
    alone, carried, script, take_async = [], [], SlotLedger._script, TokenBuckets.take_async

    async def counted(self, domain: str, mode: str, count: int) -> int:
        alone.append((mode, count))
        return await script(self, domain, mode, count)

    async def carrying(self, client, **kwargs):
        carried.append(kwargs.get("releases"))
        return await take_async(self, client, **kwargs)

    monkeypatch.setattr(SlotLedger, "_script", counted)
    monkeypatch.setattr(TokenBuckets, "take_async", carrying)

    async def crawl():
        first, second = Request("https://www.example.com/1"), Request("https://www.example.com/2")
        await middleware.process_request(first)
        await middleware.process_response(first, Response(first.url))
        await middleware.process_request(second)
        await middleware.process_response(second, Response(second.url))
        returned = await held_once(lambda now: not now)
        await middleware.close()
        return returned

    assert asyncio.run(crawl()) == {}
    assert carried and set(carried) == {(0, 0)}, "no take carried a slot of the full domain"
    assert alone[:2] == [("release", 1), ("release", 1)], alone
