"""Requests waiting for their domain's tokens, in one queue per (host, egress) and crawl.

One take asks the buckets for every request in the queue (several come at once when a batch reaches the downloader).
Those the buckets cannot serve yet stay in the queue and wait together for the next round, one timer for all of them,
instead of each sleeping on a timer of its own and asking again: a crawl at 2 requests a second holds up to
CONCURRENT_REQUESTS of them waiting, and a process of many crawls spent a good part of its CPU waking each one every
second (bench/README.md, "Density"). A round waits at most `max_sleep`, so a rule changed meanwhile applies at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from scrapy.statscollectors import StatsCollector

from throttling.buckets import GRANTED, WAIT, Decision
from throttling.crawling import CrawlClosing

Key = tuple[str, str]  # (host, egress)


@dataclass
class Waiting:
    """One request in a queue: its answer, and the seconds it waited in the queue for it."""

    answer: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    waited: float = 0.0


class TokenQueues:
    """`ask(key, tokens)` takes up to `tokens` tokens for `key` (with slots, if any); `unsent(key, decision, count)`
    hears of `count` granted tokens whose requests were dropped meanwhile (their slots go back); `sleep(delay, count)`
    waits `delay` seconds for `count` requests (counted in the crawl's stats); `closing()` says the crawl stops
    (waiting requests drop)."""

    def __init__(
        self,
        *,
        ask: Callable[[Key, int], Awaitable[Decision]],
        unsent: Callable[[Key, Decision, int], None],
        sleep: Callable[[float, int], Awaitable[None]],
        closing: Callable[[], bool],
        stats: StatsCollector,
        max_sleep: float,
        spawn: Callable[[Any], None],
    ) -> None:
        self.ask, self.unsent, self.sleep, self.closing = ask, unsent, sleep, closing
        self.stats, self.max_sleep, self.spawn = stats, max_sleep, spawn
        self._arrived: dict[Key, list[Waiting]] = {}  # requests not asked for yet, by key
        self._serving: set[Key] = set()  # keys whose queue is being served

    async def take(self, host: str, egress: str) -> tuple[Decision, float]:
        """This request's answer (granted, blocked, stale; an exception when Redis is away) and the seconds it waited
        in the queue for it."""
        waiting, key = Waiting(), (host, egress)
        self._arrived.setdefault(key, []).append(waiting)
        if key not in self._serving:
            self._serving.add(key)
            self.spawn(self._serve(key))
        decision = await waiting.answer
        return decision, waiting.waited

    async def _serve(self, key: Key) -> None:
        queued: list[Waiting] = []
        try:
            while queued := [each for each in queued + self._arrived.pop(key, []) if not each.answer.done()]:
                try:
                    decision = await self.ask(key, len(queued))
                except Exception as exc:  # Redis away, mostly: each request decides what to do, none is left hanging
                    for each in queued:
                        if not each.answer.done():
                            each.answer.set_exception(exc)
                    queued = []
                    continue
                queued = self._answer(key, queued, decision)
                if queued:
                    queued = await self._wait_round(queued, decision)
        finally:
            self._serving.discard(key)

    def _answer(self, key: Key, queued: list[Waiting], decision: Decision) -> list[Waiting]:
        """Answer the requests the decision serves (in the order they came); return those left waiting."""
        if decision.status == WAIT:
            return queued
        served = queued[: decision.granted] if decision.status == GRANTED else queued
        dropped = 0
        for each in served:
            if each.answer.done():  # its request was dropped meanwhile: the token is spent, its slot goes back
                dropped += 1
            else:
                each.answer.set_result(decision)
        if dropped:
            self.unsent(key, decision, dropped)
        return queued[len(served) :]

    async def _wait_round(self, queued: list[Waiting], decision: Decision) -> list[Waiting]:
        """Wait until the next token is due (at most `max_sleep`), all together; drop them if the crawl stops."""
        if decision.busy:
            self.stats.inc_value("throttle/slot_waits", len(queued))
        delay = min(decision.wait, self.max_sleep)
        if delay <= 0:
            return queued
        await self.sleep(delay, len(queued))
        for each in queued:
            each.waited += delay
        if not self.closing():
            return queued
        # Else a cancelled crawl sends every request that waited for a token.
        for each in queued:
            if not each.answer.done():
                self.stats.inc_value("throttle/dropped_closing")
                each.answer.set_exception(CrawlClosing("the crawl is stopping"))
        return []
