"""Trawl's downloader middlewares: the cluster-wide throttle (tokens; in-flight slots.py) and User-Agent rotation.

They run in the reactor thread. Anything that may take time (Redis, the database) is awaited on the asyncio loop
or run in a thread: the reactor is never blocked. Settings are read once, in `from_crawler`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import redis
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.httpobj import urlparse_cached

from project.errors import InfrastructureUnavailable
from project.redis import redis_client
from throttling.buckets import BLOCKED, GRANTED, STALE, WAIT, Decision, TokenBuckets, retry_after_seconds
from throttling.controller import OBSERVE_SECONDS, AdaptiveController, Observed, is_error
from throttling.crawling import (
    OVERLOAD_EXCEPTIONS,
    PAUSE_STATUSES,
    CrawlClosing,
    DomainBlocked,
    crawl_closing,
    dependency_away,
    egress_of,
    load_rules,
    throttle_options,
)
from throttling.slots import SlotLedger
from throttling.useragents import UserAgentRotationMiddleware  # noqa: F401 - re-exported: settings and tests name it

logger = logging.getLogger("trawl.throttle")


class ThrottleMiddleware:
    """Before every request, take a token from its domain's bucket and its (egress IP, domain) bucket in Redis.

    While either is empty the request waits (asyncio sleep, at most `max_sleep` at a time so a rule changed meanwhile
    applies at once) and asks again. Blocked domains: the request is dropped. A 429/503 with Retry-After pauses the
    domain for every worker. Every response's latency and outcome (and every timeout) feeds the domain's adaptive
    controller, which lowers the rate for every worker when the site slows or errors (throttling/controller.py).
    With a slot ledger (throttling/slots.py), each token also takes one of the domain's in-flight slots, cluster-wide,
    held until the request ends: while all are held the request waits as for a token.
    `request.meta["dont_throttle"] = True` lets one request skip all of this.
    """

    def __init__(
        self,
        *,
        buckets: TokenBuckets,
        redis_url: str,
        egress: str,
        stats: StatsCollector,
        max_sleep: float = 1.0,
        max_pause: float = 3600.0,
        patience: float = 120.0,
        load_rules: Callable[[], bool] = load_rules,
        controller: AdaptiveController | None = None,
        closing: Callable[[], bool] = lambda: False,
        slot_hold: float | None = None,
    ) -> None:
        self.buckets = buckets
        # With `slot_hold` (the longest a request may hold a slot), requests take cluster-wide in-flight slots.
        self.slots = None if slot_hold is None else SlotLedger(buckets=buckets, client=self._client, max_hold=slot_hold)
        self.controller = controller
        self.redis_url = redis_url
        self.egress = egress
        self.stats = stats
        self.max_sleep = max_sleep
        self.max_pause = max_pause
        self.patience = patience
        self.load_rules = load_rules
        self.closing = closing
        self._redis: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting, self._held_since = 0, 0.0
        self._observed: dict[str, Observed] = {}  # by host, until its OBSERVE_SECONDS are up
        self._calls: set[asyncio.Task] = set()  # calls to Redis under way (takes, observations)
        self._takers: dict[tuple[str, str], list[asyncio.Future]] = {}  # requests waiting to ask, by (host, egress)
        self._taking: set[tuple[str, str]] = set()  # (host, egress) whose take is under way

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ThrottleMiddleware:
        # A slot outlives no download: one that held its slot longer was lost on a path no hook sees.
        hold = crawler.settings.getfloat("DOWNLOAD_TIMEOUT") + 60
        middleware = cls(
            **throttle_options(crawler.settings),
            stats=crawler.stats,
            closing=lambda: crawl_closing(crawler),
            slot_hold=hold,
        )
        crawler.signals.connect(middleware.close, signal=signals.spider_closed)
        # A request that reached the downloader ends there, whatever the middlewares' hooks see afterwards.
        crawler.signals.connect(middleware.request_ended, signal=signals.request_left_downloader)
        return middleware

    async def process_request(self, request: Request) -> None:
        if request.meta.get("dont_throttle"):
            self.stats.inc_value("throttle/skipped")
            return None
        host = urlparse_cached(request).hostname
        if not host:
            return None
        waited, decision = await self._acquire(host, egress_of(request, self.egress))
        if self.slots is not None:
            self.slots.hold(request, self.buckets.slots_domain(host, decision))  # counted as `granted` already
        self.stats.inc_value("throttle/requests")
        if waited:
            self.stats.inc_value("throttle/delayed")
            self.stats.inc_value("throttle/wait_seconds_total", round(waited, 3))  # summed over concurrent requests
        return None

    async def _acquire(self, host: str, egress: str) -> tuple[float, Decision]:
        """Wait until both buckets gave a token (and a slot); return the seconds spent sleeping and the grant. Redis
        away, or the database while the rules are reloaded, is waited out for up to `patience` seconds."""
        waited, down_since = 0.0, None
        while True:
            if waited and self.closing():
                # Without this a cancelled crawl keeps sending every request that was waiting for a token.
                self.stats.inc_value("throttle/dropped_closing")
                raise CrawlClosing("the crawl is stopping")
            try:
                decision = await self._take(host, egress)
                if decision.status == GRANTED:
                    return waited, decision
                if decision.busy:
                    self.stats.inc_value("throttle/slot_waits")
                delay = min(await self._delay(host, decision), self.max_sleep)  # may reload the rules (database)
            except Exception as exc:
                if (away := dependency_away(exc)) is None:
                    raise
                self.stats.inc_value(f"throttle/{away}_errors")
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since >= self.patience:
                    self.stats.inc_value("trawl/infrastructure_errors")
                    raise InfrastructureUnavailable(f"{away} unavailable for {self.patience:.0f}s: {exc}") from exc
                logger.warning("throttle: %s unavailable (%s); asking again in %.1fs", away, exc, self.max_sleep)
                delay = self.max_sleep
            if delay > 0:
                self.stats.inc_value("throttle/waits")
                self._hold(+1)
                try:
                    await asyncio.sleep(delay)
                finally:
                    self._hold(-1)
                waited += delay

    async def _take(self, host: str, egress: str) -> Decision:
        """This request's answer from the buckets. Requests for the same buckets that come while a take is under way
        (several at a time once a batch of requests reaches the downloader) ask together in the next one."""
        waiter = asyncio.get_running_loop().create_future()
        key = (host, egress)
        self._takers.setdefault(key, []).append(waiter)
        if key not in self._taking:
            self._taking.add(key)
            self._call(self._send_takes(key))
        return await waiter

    async def _send_takes(self, key: tuple[str, str]) -> None:
        host, egress = key
        try:
            while waiters := [waiter for waiter in self._takers.pop(key, []) if not waiter.done()]:
                try:
                    client, tokens = await self._client(), len(waiters)
                    take = functools.partial(self.buckets.take_async, client, host=host, egress=egress, tokens=tokens)
                    decision = await (take() if self.slots is None else self.slots.take(take))
                except Exception as exc:  # Redis away, mostly: each request decides (_acquire), none is left hanging
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(exc)
                    continue
                slots = decision.granted if self.slots is not None and decision.status == GRANTED else 0
                if slots:
                    slots_domain = self.buckets.slots_domain(host, decision)
                    self.slots.granted(slots_domain, slots)
                for number, waiter in enumerate(waiters):
                    if waiter.done():  # its request was dropped meanwhile: the token is spent, its slot goes back
                        if number < slots:
                            self.slots.give_back(slots_domain, 1)
                        continue
                    if decision.status == GRANTED and number >= decision.granted:
                        waiter.set_result(replace(decision, status=WAIT))  # none left for it: wait for the next
                    else:
                        waiter.set_result(decision)
        finally:
            self._taking.discard(key)

    def _hold(self, change: int) -> None:
        """`throttle/held_seconds`: wall time during which at least one request waited for a token — the crawl's delay,
        unlike `wait_seconds_total`, which adds up the waits of concurrent requests."""
        now = time.monotonic()
        if change > 0 and self._waiting == 0:
            self._held_since = now
        self._waiting += change
        if self._waiting == 0:
            self.stats.inc_value("throttle/held_seconds", round(now - self._held_since, 3))

    async def _delay(self, host: str, decision: Decision) -> float:
        if decision.status == BLOCKED:
            self.stats.inc_value("throttle/blocked")
            raise DomainBlocked(f"{host} is blocked by its throttle rule ({decision.rule})")
        if decision.status == STALE:
            # Only one process loads the rules; the others ask again a moment later.
            loaded = await asyncio.to_thread(self.load_rules)
            self.stats.inc_value("throttle/rules_loaded" if loaded else "throttle/rules_awaited")
            return 0.0 if loaded else 0.05
        return decision.wait

    def request_ended(self, request: Request) -> None:
        """The request's slot goes back: it left the downloader, or a later middleware answered or dropped it."""
        if self.slots is not None:
            self.slots.release(request)

    async def process_response(self, request: Request, response: Response) -> Response:
        self.request_ended(request)
        self._observe(request, latency=request.meta.get("download_latency"), error=is_error(response.status))
        if response.status in PAUSE_STATUSES:
            seconds = retry_after_seconds(response.headers.get(b"Retry-After"), now=time.time())
            host = urlparse_cached(request).hostname
            if seconds and host:
                seconds = min(seconds, self.max_pause)
                try:
                    await self.buckets.pause_async(await self._client(), host=host, seconds=seconds)
                except redis.RedisError as exc:  # sharing the pause is best effort; the response is the site's
                    logger.warning("throttle: could not pause %s (redis: %s)", host, exc)
                    return response
                self.stats.inc_value("throttle/paused")
                logger.info("throttle: %s answered %s, pausing it for %.0fs", host, response.status, seconds)
        return response

    async def process_exception(self, request: Request, exception: Exception) -> None:
        self.request_ended(request)
        if isinstance(exception, OVERLOAD_EXCEPTIONS):
            self._observe(request, latency=None, error=True)
        return None

    def _observe(self, request: Request, *, latency: float | None, error: bool) -> None:
        """Count one outcome for the domain's controller; the host's count goes to Redis OBSERVE_SECONDS later."""
        host = urlparse_cached(request).hostname
        if self.controller is None or not host or request.meta.get("dont_throttle"):
            return
        observed = self._observed.get(host)
        if observed is None:
            observed = self._observed[host] = Observed()
            asyncio.get_running_loop().call_later(OBSERVE_SECONDS, self._send_observed, host)
        observed.add(latency=latency, error=error)

    def _send_observed(self, host: str) -> None:
        observed = self._observed.pop(host, None)
        if observed is not None:
            self._call(self._feed(host, observed))

    def _call(self, coro: Any) -> None:
        """Run a Redis call on the loop without waiting for it here; close() waits for every one under way."""
        task = asyncio.get_running_loop().create_task(coro)
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _feed(self, host: str, observed: Observed) -> None:
        """Feed a host's outcomes to its domain's controller. Redis away: the crawl goes on at the rate it had."""
        try:
            state = await self.controller.observe_async(await self._client(), host=host, observed=observed)
        except redis.RedisError as exc:
            self.stats.inc_value("throttle/adaptive_errors")
            logger.warning("throttle: adaptive controller unavailable (%s)", exc)
            return
        if state is not None:
            self.stats.inc_value("throttle/adaptive_decisions")
            self.stats.min_value("throttle/adaptive_min_factor", round(state.factor, 3))
            if state.reason:
                logger.info("throttle: %s at %.0f%% of its rate: %s", host, state.factor * 100, state.reason)

    async def _client(self) -> Any:
        # One client per event loop: redis.asyncio connections belong to the loop that opened them.
        loop = asyncio.get_running_loop()
        if self._redis is None or self._loop is not loop:
            self._redis = redis_client(self.redis_url, asyncio=True)
            self._loop = loop
        return self._redis

    async def close(self) -> None:
        for host in list(self._observed):  # what the crawl's last responses said, before their interval is up
            self._send_observed(host)
        while self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
        if self.slots is not None:
            await self.slots.close()
        if self._redis is not None and self._loop is asyncio.get_running_loop():
            await self._redis.aclose()
        self._redis = self._loop = None
