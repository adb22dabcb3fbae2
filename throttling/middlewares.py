"""Trawl's throttle downloader middleware: cluster-wide tokens, in-flight slots (slots.py), adaptive rates.

They run in the reactor thread. Anything that may take time (Redis, the database) is awaited on the asyncio loop
or run in a thread: the reactor is never blocked. Settings are read once, in `from_crawler`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.httpobj import urlparse_cached

from project.errors import InfrastructureUnavailable
from project.redis import loop_redis
from throttling.buckets import BLOCKED, GRANTED, STALE, Decision, TokenBuckets
from throttling.controller import AdaptiveController, Observed, is_error
from throttling.crawling import (
    OVERLOAD_EXCEPTIONS,
    CrawlClosing,
    DomainBlocked,
    crawl_closing,
    dependency_away,
    egress_of,
    load_rules,
    throttle_options,
)
from throttling.observations import Observations
from throttling.pauses import pause_if_asked, token_void
from throttling.queues import TokenQueues
from throttling.robots import RobotsReader
from throttling.rule_limits import RuleLimits
from throttling.slots import SlotLedger
from throttling.useragents import UserAgentRotationMiddleware  # noqa: F401 - re-exported: settings and tests name it

logger = logging.getLogger("trawl.throttle")


class ThrottleMiddleware:
    """Before every request, take a token from its domain's bucket and its (egress IP, domain) bucket in Redis.

    While either is empty the request waits in the crawl's queue for the domain (queues.py: one take and one sleep a
    round for every request waiting there, at most `max_sleep` a round so a rule changed meanwhile applies at once)
    and is asked for again; a token due within `max_sleep` is taken ahead and the request sleeps until then,
    so the next one's wait runs from that token however late this one wakes. Blocked domains: the request is dropped.
    A 429/503 with Retry-After pauses the domain for every worker. Every response's latency and outcome feeds the
    domain's adaptive controller (throttling/controller.py). With a slot ledger (throttling/slots.py), each token also
    takes one of the domain's in-flight slots, cluster-wide, held until the request ends: while all are held the
    request waits as for a token. `request.meta["dont_throttle"] = True` lets one request skip all of this.
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
        robots: RobotsReader | None = None,
        rules_check_seconds: float = 15.0,
    ) -> None:
        self.buckets = buckets
        self.limits = RuleLimits(buckets=buckets, robots=robots, stats=stats, check_seconds=rules_check_seconds)
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
        self._waiting, self._held_since = 0, 0.0
        self._observed = Observations(lambda host, observed: self._call(self._feed(host, observed)))
        self._calls: set[asyncio.Task] = set()  # calls to Redis under way (takes, observations)
        self.queues = TokenQueues(
            ask=self._ask,
            unsent=self._unsent,
            sleep=self._sleep,
            closing=lambda: self.closing(),
            stats=stats,
            max_sleep=max_sleep,
            spawn=self._call,
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ThrottleMiddleware:
        # A slot outlives no download: one that held its slot longer was lost on a path no hook sees.
        hold, options = crawler.settings.getfloat("DOWNLOAD_TIMEOUT") + 60, throttle_options(crawler.settings)
        robots = RobotsReader.from_crawler(crawler, buckets=options["buckets"])
        closing = functools.partial(crawl_closing, crawler)
        middleware = cls(**options, stats=crawler.stats, closing=closing, slot_hold=hold, robots=robots)
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
        if self.limits.check_due():  # rules changed behind the services' back (services.py)
            self._call(self.limits.check_rules())
        await self.limits.apply(await self._client(), request, host)
        waited, egress, voided = 0.0, egress_of(request, self.egress), False
        while True:
            # Before the take: a pause noted while its answer was on its way (process_response ran first) still counts.
            asked = time.monotonic()
            more, decision = await self._acquire(host, egress)
            waited += more
            if self.slots is not None:
                self.slots.hold(request, self.buckets.slots_domain(host, decision))  # counted as `granted` already
            if not decision.after:
                break
            try:  # its token, taken already, comes in a moment: sent then
                await self._sleep(decision.after)
                self._drop_if_closing()
            except BaseException:  # dropped meanwhile (the crawl stops): its slot goes back
                self.request_ended(request)
                raise
            waited += decision.after
            if not token_void(host, asked, after_error=not voided):
                break
            voided = True
            self.stats.inc_value("throttle/reserved_void")
            self.request_ended(request)  # its site asked for a pause or refused meanwhile (pauses.py): ask again
        self.stats.inc_value("throttle/requests")
        if waited:
            self.stats.inc_value("throttle/delayed")
            self.stats.inc_value("throttle/wait_seconds_total", round(waited, 3))  # summed over concurrent requests
        return None

    async def _acquire(self, host: str, egress: str) -> tuple[float, Decision]:
        """Wait until both buckets gave a token (and a slot); return the seconds spent waiting and the grant. A token
        not due yet is waited for in the domain's queue (queues.py), which drops the request if the crawl stops
        meanwhile. Redis away, or the database while the rules are reloaded, is waited out for up to `patience`
        seconds."""
        waited, slept, down_since = 0.0, False, None
        while True:
            if slept:
                self._drop_if_closing()
            try:
                decision, queued = await self.queues.take(host, egress)
                waited += queued
                if decision.status == GRANTED:
                    return waited, decision
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
                await self._sleep(delay)
                waited, slept = waited + delay, True

    def _drop_if_closing(self) -> None:  # else a cancelled crawl sends every request that waited for a token
        if self.closing():
            self.stats.inc_value("throttle/dropped_closing")
            raise CrawlClosing("the crawl is stopping")

    async def _sleep(self, delay: float, requests: int = 1) -> None:
        """`requests` waiting `delay` seconds together (one, or a domain's queue: queues.py), counted as waits."""
        self.stats.inc_value("throttle/waits", requests)
        self._hold(+requests)
        try:
            await asyncio.sleep(delay)
        finally:
            self._hold(-requests)

    async def _ask(self, key: tuple[str, str], tokens: int) -> Decision:
        """Take up to `tokens` tokens for the queue of `key` (throttling/queues.py), with as many slots."""
        host, egress = key
        client = await self._client()
        take = functools.partial(
            self.buckets.take_async, client, host=host, egress=egress, tokens=tokens, reserve=self.max_sleep
        )
        if self.slots is None:
            return await take()
        decision = await self.slots.take(take, host=host)
        if decision.status == GRANTED and decision.granted:
            domain = self.buckets.slots_domain(host, decision)
            self.slots.granted(domain, decision.granted, full=decision.free_slots == 0)
        elif decision.busy:
            self.slots.seen_full(self.buckets.slots_domain(host, decision))
        return decision

    def _unsent(self, key: tuple[str, str], decision: Decision, count: int) -> None:
        """`count` granted tokens whose requests were dropped meanwhile: spent, but their slots go back."""
        if self.slots is not None:
            self.slots.give_back(self.buckets.slots_domain(key[0], decision), count)

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
        await pause_if_asked(self.buckets, self._client, request, response, max_pause=self.max_pause, stats=self.stats)
        return response

    async def process_exception(self, request: Request, exception: Exception) -> None:
        self.request_ended(request)
        if isinstance(exception, OVERLOAD_EXCEPTIONS):
            self._observe(request, latency=None, error=True)
        return None

    def _observe(self, request: Request, *, latency: float | None, error: bool) -> None:
        """Count one outcome for the domain's controller (sent to Redis a moment later: observations.py)."""
        host = urlparse_cached(request).hostname
        if self.controller is not None and host and not request.meta.get("dont_throttle"):
            self._observed.add(host, latency=latency, error=error)

    def _call(self, coro: Any) -> None:
        """Run a Redis call on the loop without waiting for it here; close() waits for every one under way."""
        task = asyncio.get_running_loop().create_task(coro)
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _feed(self, host: str, observed: Observed) -> None:
        await self.controller.feed_async(await self._client(), host=host, observed=observed, stats=self.stats)

    async def _client(self) -> Any:
        return loop_redis(self.redis_url)  # the loop's: redis.asyncio connections belong to the loop that opened them

    async def close(self) -> None:
        self._observed.flush_all()
        while self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)
        if self.slots is not None:
            await self.slots.close()
