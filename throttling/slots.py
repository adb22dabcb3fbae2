"""Cluster-wide in-flight slots per domain: what one crawl process holds, given back as each request ends.

Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN counts one process's requests; a job of 32 shards would open 32 times as
many connections to one site. The token take (buckets.lua) also takes one of the domain's slots per request (the
rule's `concurrency`, 8 by default), recorded in Redis under this process's holder id with an expiry. This ledger
remembers which request holds which slot and gives it back when the request ends (response, exception, dropped),
renews the holder's expiry while it holds any, and gives everything back when the crawl closes. A killed process
renews nothing: its slots come back when its expiry passes. Runs on the reactor's asyncio loop; no request waits for
a slot's return. Slots given back ride with the holder's next take of the same domain (one script call, where a
crawl at a few requests a second made it two a request), or go alone after RETURN_GATHER_SECONDS; while the domain's
every slot is held they go at once, so a holder that takes again never gets them ahead of others waiting for one.

Each renewal also sets the holder's count in Redis to its own tally, so a count that drifted is put right within a
third of a lease: a take whose reply was lost (a timeout under load, after Redis ran the script) or that redis-py sent
again would otherwise keep slots nobody holds for as long as the holder lives, and with enough of them a domain's
every slot; a release sent twice would let one request too many through. The tally is exact only while none of the
holder's takes and releases is under way, so they pass a gate the renewal closes for one round trip.
"""

from __future__ import annotations

import asyncio
import functools
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
from throttling.buckets import TokenBuckets, registered_domain

logger = logging.getLogger("trawl.throttle")

SCRIPT = LuaScript(Path(__file__).with_name("slots.lua").read_text())
# How long a renewal waits for the takes and releases under way to land before it sets the counts; past it, it only
# pushes the expiry (and sets them at the next renewal).
SETTLE_SECONDS = 2.0
SETTLE_POLL_SECONDS = 0.002
# How long slots given back wait for a take of their domain to carry them: a crawl at a request a second or more
# takes again within it. Bounded, so another holder waiting for a free slot waits at most this much longer.
RETURN_GATHER_SECONDS = 1.0


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
        # domain → slots granted and not given back (what Redis should say); a domain at 0 stays until Redis says 0 too
        self._counts: Counter = Counter()
        self._returning: Counter = Counter()  # domain → slots to give back in the next call
        self._sending: set[str] = set()
        self._due: dict[str, asyncio.TimerHandle] = {}  # domain → the call that sends its returns alone
        self._full: set[str] = set()  # domains whose every slot was held at this holder's last take
        self._tasks: set[asyncio.Task] = set()
        self._renewer: asyncio.Task | None = None
        self._open = asyncio.Event()  # the gate takes and releases pass; closed while a renewal sets the counts
        self._open.set()
        self._under_way = 0  # takes and releases sent and not answered
        self._generation = 0  # counts settings: a release counted before one is already part of it
        self._closed = False

    async def gated(self, call: Callable[[], Awaitable[Any]], *, generation: int | None = None) -> Any:
        """Run `call` (a take of this holder's slots, or a release) once the gate is open; `None` without running it
        if the counts were set since `generation` (what it would change is already in them)."""
        while not self._open.is_set():
            await self._open.wait()
        if generation is not None and generation != self._generation:
            return None
        self._under_way += 1
        try:
            return await call()
        finally:
            self._under_way -= 1

    async def take(self, take: Callable[..., Awaitable[Any]], *, host: str) -> Any:
        """`take(holder=…, releases=…)`: a take of tokens for `host` that also counts slots for this holder, never while
        it sets its counts, and gives back the slots of the host and of its domain that wait to go."""
        host = host.lower().rstrip(".")
        domain = registered_domain(host)

        async def carrying() -> Any:
            # Taken out here, past the gate: a setting of the counts that came first left them out already.
            releases = (self._carried(host), self._carried(domain) if domain != host else 0)
            # A take that fails may have run in Redis (its reply lost): sending them again could free slots twice,
            # one request too many each. The tally leaves them out, so the next setting of the counts frees them.
            return await take(holder=self.holder, releases=releases)

        return await self.gated(carrying)

    def _carried(self, domain: str) -> int:
        """The slots of `domain` a take carries back. None of a full domain: they go alone, so a slot they free is not
        this holder's again before anyone else's."""
        return 0 if domain in self._full else self._returning.pop(domain, 0)

    def granted(self, domain: str, count: int, *, full: bool = False) -> None:
        """A take just counted `count` slots of `domain` for this holder in Redis: counted here at the same moment;
        `full`: no slot of the domain is left free."""
        self._counts[domain] += count
        self.seen_full(domain, full)
        if self._renewer is None:
            self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    def hold(self, request: Any, domain: str) -> None:
        """`request` holds one of the slots `granted` counted."""
        self.release(request)  # the same request sent again (a middleware rescheduled it) holds one slot, not two
        self._held[request] = (domain, time.monotonic())

    def release(self, request: Any) -> None:
        """`request` ended (or was dropped): its slot goes back, for every worker. Once per request; others no-op."""
        held = self._held.pop(request, None)
        if held is not None:
            self.give_back(held[0], 1)

    def seen_full(self, domain: str, full: bool = True) -> None:
        """Whether this holder's last take of `domain` found (or left) its every slot held: a take waited for one."""
        if full:
            self._full.add(domain)
        else:
            self._full.discard(domain)

    def give_back(self, domain: str, count: int) -> None:
        """Return `count` slots of `domain` in Redis (also slots granted for requests dropped before they held one):
        with the next take of the domain, or alone (at once while it is full). Releases together go in one call."""
        self._counts[domain] -= count
        self._returning[domain] += count
        if domain in self._full:
            self._send_due(domain)
        elif domain not in self._due and domain not in self._sending and not self._closed:
            self._due[domain] = asyncio.get_running_loop().call_later(RETURN_GATHER_SECONDS, self._send_due, domain)

    def _send_due(self, domain: str) -> None:
        if due := self._due.pop(domain, None):
            due.cancel()
        if self._returning.get(domain) and domain not in self._sending:
            self._sending.add(domain)
            self._spawn(self._send_returns(domain))

    async def _send_returns(self, domain: str) -> None:
        try:
            while count := self._returning.pop(domain, 0):
                try:
                    release = functools.partial(self._script, domain, "release", count)
                    await self.gated(release, generation=self._generation)
                except redis.RedisError as exc:
                    # Not sent again: Redis may have run it (its reply lost), and a second release would let one
                    # request too many through. The tally already leaves them out: the next renewal frees them.
                    logger.warning("throttle: could not give back %s slot(s) of %s (redis: %s)", count, domain, exc)
                    return
        finally:
            self._sending.discard(domain)

    async def _script(self, domain: str, mode: str, count: int) -> int:
        keys, args = [self.buckets.slots_key(domain)], [self.holder, mode, count, self.lease]
        return await SCRIPT.run_async(await self.client(), keys, args)

    async def _renew_forever(self) -> None:
        while not self._closed:  # close() also cancels it; the flag ends it even if a library swallowed that cancel
            await asyncio.sleep(self.lease / 3)
            if not self._closed:
                await self.renew()

    async def renew(self) -> None:
        """Set this process's count of every domain it took slots of to its tally, its expiry a lease ahead; if its
        takes and releases do not settle in time, only push the expiry of what it holds and retry failed returns."""
        stale = time.monotonic() - self.max_hold
        for request, (domain, since) in list(self._held.items()):
            if since < stale:
                logger.warning("throttle: a request to %s held its slot %.0fs; giving it back", domain, self.max_hold)
                self.release(request)
        self._open.clear()
        try:
            if await self._settle():
                await self._set_counts()
                return
        finally:
            self._open.set()
        await self._push_expiry()

    async def _settle(self) -> bool:
        # Polled, not asyncio.wait_for: on Python 3.11 wait_for swallows a cancel that comes as the wait ends, and
        # close() would wait forever for a renewer that goes on renewing.
        deadline = time.monotonic() + SETTLE_SECONDS
        while self._under_way:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(SETTLE_POLL_SECONDS)
        return True

    async def _set_counts(self) -> None:
        self._generation += 1
        self._returning.clear()  # the counts set below already leave them out
        counts = dict(self._counts)  # as of that moment: a slot given back meanwhile goes in `_returning`, not here
        for domain in sorted(counts):
            count = max(counts[domain], 0)
            try:
                await self._script(domain, "set", count)
            except redis.RedisError as exc:
                logger.warning("throttle: could not renew the slots of %s (redis: %s)", domain, exc)
                continue
            if count == 0 and self._counts[domain] == 0:
                del self._counts[domain]

    async def _push_expiry(self) -> None:
        for domain in list(self._returning):
            if domain not in self._sending:
                self._sending.add(domain)
                self._spawn(self._send_returns(domain))
        for domain, count in list(self._counts.items()):
            if count <= 0:  # nothing to keep; the next setting of the counts says 0 to Redis
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
        self._closed = True
        for due in self._due.values():  # the drop below gives everything back
            due.cancel()
        self._due.clear()
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
