"""Cluster-wide in-flight slots per domain: what one crawl process holds, given back as each request ends.

Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN counts one process's requests; a job of 32 shards would open 32 times as
many connections to one site. The token take (buckets.lua) also takes one of the domain's slots per request (the
rule's `concurrency`, 8 by default), recorded in Redis under this process's holder id with an expiry. This ledger
remembers which request holds which slot and gives it back when the request ends (response, exception, dropped),
renews the holder's expiry while it holds any (counting its own requests again if Redis lost them), and gives
everything back when the crawl closes. A killed process renews nothing: its slots come back when its expiry passes.
Runs on the reactor's asyncio loop; no request waits for a slot's return.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis

from project.redis import LuaScript
from throttling.buckets import TokenBuckets

logger = logging.getLogger("trawl.throttle")

SCRIPT = LuaScript(Path(__file__).with_name("slots.lua").read_text())


class SlotLedger:
    """The slots one crawl process holds, by request. `client` returns the asyncio Redis client of the running loop."""

    def __init__(
        self, *, buckets: TokenBuckets, client: Callable[[], Awaitable[Any]], max_hold: float, holder: str = ""
    ) -> None:
        self.buckets = buckets
        self.client = client
        self.lease = buckets.slot_lease
        # A request that held its slot this long without ending was lost on a path no hook sees: stop counting it.
        self.max_hold = max_hold
        self.holder = holder or f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._held: dict[Any, tuple[str, float]] = {}  # request → (domain, since)
        self._counts: Counter = Counter()  # domain → slots held (what Redis should say)
        self._returning: Counter = Counter()  # domain → slots to give back in the next call
        self._sending: set[str] = set()
        self._tasks: set[asyncio.Task] = set()
        self._renewer: asyncio.Task | None = None

    def hold(self, request: Any, domain: str) -> None:
        self.release(request)  # the same request sent again (a middleware rescheduled it) holds one slot, not two
        self._held[request] = (domain, time.monotonic())
        self._counts[domain] += 1
        if self._renewer is None:
            self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    def release(self, request: Any) -> None:
        """`request` ended (or was dropped): its slot goes back, for every worker. Once per request; others no-op."""
        held = self._held.pop(request, None)
        if held is not None:
            self._counts[held[0]] -= 1
            self.give_back(held[0], 1)

    def give_back(self, domain: str, count: int) -> None:
        """Return `count` slots of `domain` in Redis (also slots granted for requests dropped before they held one).
        Releases that come together go in one call."""
        self._returning[domain] += count
        if domain not in self._sending:
            self._sending.add(domain)
            self._spawn(self._send_returns(domain))

    async def _send_returns(self, domain: str) -> None:
        try:
            while count := self._returning.pop(domain, 0):
                try:
                    await self._script(domain, "release", count)
                except redis.RedisError as exc:  # kept for the next renewal; the lease bounds the rest
                    self._returning[domain] += count
                    logger.warning("throttle: could not give back %s slot(s) of %s (redis: %s)", count, domain, exc)
                    return
        finally:
            self._sending.discard(domain)

    async def _script(self, domain: str, mode: str, count: int) -> int:
        keys, args = [self.buckets.slots_key(domain)], [self.holder, mode, count, self.lease]
        return await SCRIPT.run_async(await self.client(), keys, args)

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            await self.renew()

    async def renew(self) -> None:
        """Push this process's expiry a lease ahead for every domain it holds slots of; retry returns that failed."""
        stale = time.monotonic() - self.max_hold
        for request, (domain, since) in list(self._held.items()):
            if since < stale:
                logger.warning("throttle: a request to %s held its slot %.0fs; giving it back", domain, self.max_hold)
                self.release(request)
        for domain in list(self._returning):
            if domain not in self._sending:
                self._sending.add(domain)
                self._spawn(self._send_returns(domain))
        for domain, count in list(self._counts.items()):
            if count <= 0:
                del self._counts[domain]
                continue
            try:
                await self._script(domain, "renew", count)
            except redis.RedisError as exc:
                logger.warning("throttle: could not renew the slots of %s (redis: %s)", domain, exc)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """The crawl is over: every slot it still holds goes back."""
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
            self._renewer = None
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        domains = {domain for domain, _ in self._held.values()} | set(self._counts) | set(self._returning)
        self._held.clear()
        self._counts.clear()
        self._returning.clear()
        for domain in domains:
            try:
                await self._script(domain, "drop", 0)
            except redis.RedisError as exc:  # its expiry gives them back
                logger.warning("throttle: could not give back the slots of %s (redis: %s)", domain, exc)
