"""Scrapy's scheduler and dupefilter on the job's frontier in Redis (runtime.frontier), shared by every shard.

`FrontierScheduler` (the SCHEDULER setting) queues requests in Redis and takes them out into its shard's in-flight
set; a request leaves that set only when the engine is done with it (downloaded, its callback's requests queued, its
items processed), in the same script call that writes its requests and items ahead to Redis. That call is awaited
on the reactor's event loop: the crawl goes on meanwhile, and the request counts as held until it landed. Items are
stored in the database a moment later by the task (crawls.services.execution); a shard that dies before that leaves
them written ahead, and a live shard stores them (runtime.frontier). When the engine runs out of work the scheduler
asks the frontier whether the job is done: it keeps the spider open while any shard still holds requests that may
yield more, and lets it close once the queue is empty and nothing is in flight anywhere. Read back as data only.

Start requests are checked against the seen-set even with `dont_filter`: a resumed attempt or shard runs start() again.

The shard's lease is renewed by a thread of its own (runtime.frontier.LeaseKeeper), not by the reactor, which a long
callback or a full item queue may hold. A frontier that Redis lost (runtime.frontier.leases: its epoch is gone) stops
the crawl with `frontier_lost`; the job is then requeued to start again (crawls.services.execution).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict, deque
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import DontCloseSpider

from runtime.bridge.handoff import HANDOFF, handoff_missing, item_passed
from runtime.frontier import Frontier, FrontierEnded, FrontierLost, async_binary_redis, bounded, codec
from runtime.frontier.dupefilter import FrontierDupeFilter, frontier_for
from runtime.frontier.engine_hooks import on_request_finished, poke_engine_later, store_wanted, wake_engine
from runtime.frontier.patient import commit_patiently
from runtime.frontier.shard_lease import ShardLease
from throttling.requeue import DELAY_META

logger = logging.getLogger("trawl.frontier")

IDLE_POLL_SECONDS = 0.3  # how soon an idle shard looks at the frontier again (Scrapy's own heartbeat is 5 s)
# What a callback yields (links, items) goes to Redis with its request's end, in one commit (at a few pages a second
# each would be a round trip of its own); this is how long it waits for that end before it goes alone.
OUTBOX_GATHER_SECONDS = 0.25
# Requests this shard queued, kept as objects until it takes them back (most of a shard's requests are its own), so
# taking one costs no decoding: as Scrapy's memory queue does, it gets back the object it queued. Beyond this many
# (the oldest go first), or when another shard or attempt takes them, they are rebuilt from Redis. ~1.7 KB each.
REQUESTS_KEPT_MAX = 5_000
# Fingerprints this shard remembers seeing (~150 B each; the least recently met go first, to be asked of Redis again).
# With REQUESTS_KEPT_MAX, what keeps a million-page crawl's process within 50 MiB of growth (bench/frontier_memory.py).
KNOWN_MAX = 50_000
# Imported from here: DUPEFILTER_CLASS names this module; the runner and the child wake the engine, hear store_wanted.
__all__ = ("FrontierDupeFilter", "FrontierScheduler", "frontier_for", "store_wanted", "wake_engine")


class FrontierScheduler(BaseScheduler):
    def __init__(self, crawler: Any, frontier: Frontier, dupefilter: FrontierDupeFilter) -> None:
        self.crawler = crawler
        self.frontier = frontier
        self.df = dupefilter
        self.stats = crawler.stats
        self.spider: Spider | None = None
        self.held: dict[Request, bytes] = {}  # requests taken from Redis, until the engine is done with them
        # At most this many held at once: the pages a SIGKILL makes the next attempt fetch again. Scrapy's own
        # bound on downloads does not count responses still in the spider's callbacks.
        self.max_held = max(1, crawler.settings.getint("CONCURRENT_REQUESTS"))
        self.patience = crawler.settings.getfloat("TRAWL_INFRA_PATIENCE_SECONDS")  # Redis away: how long commits wait
        self.acking = 0  # requests done whose commit has not landed yet (still in flight in Redis, so still held)
        self.taken: deque[bytes] = deque()  # taken from Redis (so in flight) but not handed to the engine yet
        self.reserved = 0  # requests commits under way may take
        self.commits: set[asyncio.Task] = set()  # commits under way
        self.client: Any = None  # redis.asyncio client of the reactor's loop, for commits
        # failed: a commit gave up (Redis away too long, or a bug): the crawl stops, nothing more is sent
        self.closing, self.failed = False, False
        # Requests accepted, not yet in Redis (OUTBOX_GATHER_SECONDS). One sent back with a delay (DELAY_META: a page
        # the site refused) waits in the frontier that long.
        self.outbox: list[tuple[bytes, int, bytes | None, float]] = []
        self.items: list[bytes] = []  # items scraped, to write ahead with the requests that yielded them
        self.done: list[bytes] = []  # requests the engine is done with, to take out of flight with what they yielded
        self.flush_call: Any = None
        # payload -> the request it was made of (REQUESTS_KEPT_MAX); ordered, to drop the oldest in O(1)
        self.kept: OrderedDict[bytes, Request] = OrderedDict()
        self.local: deque[Request] = deque()  # requests that cannot be serialized (not durable, as Scrapy's own)
        self.lease = ShardLease(crawler, frontier)  # renewed beside the reactor; knows when the frontier is lost
        self.leave = ""  # "done" / "last" once this shard left the job
        self.poke: Any = None  # the pending call that wakes an idle engine
        self.due_call: Any = None  # the pending call that looks for kept-back requests when the next is due
        # Fingerprints this shard knows are in the seen-set: most links point at pages already seen, and those are
        # dropped here without a round trip to Redis (at most KNOWN_MAX: Redis stays the source of truth).
        self.known = bounded.RecentSet(KNOWN_MAX)
        # Whether the queue may hold requests. The engine asks very often; a wrong "no" only sends it to the idle check,
        # which asks Redis (Frontier.try_finish) and wakes the engine again if there is work.
        self.maybe_pending = True

    @classmethod
    def from_crawler(cls, crawler: Any) -> FrontierScheduler:
        frontier = frontier_for(crawler.settings)
        return cls(crawler, frontier, FrontierDupeFilter(frontier, crawler.request_fingerprinter, crawler.stats))

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.lease.take()
        self.crawler.signals.connect(self._on_idle, signal=signals.spider_idle, weak=False)
        if handoff_missing(self.crawler):  # the items would not be written ahead: lost if the shard dies
            raise RuntimeError(f"FrontierScheduler needs {HANDOFF} in ITEM_PIPELINES_BASE (with_item_handoff)")
        self.crawler.signals.connect(self._on_item, signal=item_passed, weak=False)
        on_request_finished(self.crawler, self._finished)

    def close(self, reason: str) -> Any:
        """Send what is left and wait until every commit landed (the engine waits for the Deferred returned)."""
        from scrapy.utils.defer import deferred_from_coro

        self.closing = True  # take nothing more into flight
        self._send_outbox()
        self.lease.stop()
        for call in (self.poke, self.due_call, self.flush_call):
            if call is not None and call.active():
                call.cancel()
        return deferred_from_coro(self._closed())

    async def _closed(self) -> None:
        while self.commits:
            await asyncio.gather(*self.commits, return_exceptions=True)

    def has_pending_requests(self) -> bool:
        return bool(self.local or self.taken or self.outbox or self.commits) or self.maybe_pending

    def enqueue_request(self, request: Request) -> bool:
        filtered = not request.dont_filter or bool(request.meta.get("is_start_request"))
        fingerprint = self.df.request_fingerprint(request) if filtered else None
        if fingerprint is not None:
            if fingerprint in self.known:
                self.df.log(request, self.spider)
                return False
            self.known.add(fingerprint)
        delay = float(request.meta.pop(DELAY_META, 0) or 0)  # once: a copy of this request is not kept back again
        try:
            payload = codec.encode(request, self.spider)
        except (ValueError, TypeError, AttributeError) as exc:  # codec.Unstorable among them
            if fingerprint is not None and self.frontier.seen(fingerprint):
                self.df.log(request, self.spider)
                return False
            logger.warning("frontier: %s cannot be serialized (%s); kept in memory, not durable", request, exc)
            self.local.append(request)
            self.stats.inc_value("scheduler/enqueued/memory")
            self.stats.inc_value("scheduler/enqueued")
            return True
        self.outbox.append((payload, request.priority, fingerprint, delay))
        if delay:
            self.stats.inc_value("scheduler/enqueued/delayed")
        if len(self.kept) >= REQUESTS_KEPT_MAX:  # the oldest are the likeliest to have gone to another shard
            self.kept.popitem(last=False)
        self.kept[payload] = request
        self._send_soon()
        return True

    def _on_item(self, data: dict[str, Any]) -> None:
        self.items.append(json.dumps(data, default=str).encode())
        self._send_soon()

    def _send_soon(self) -> None:
        if self.flush_call is None or not self.flush_call.active():
            from twisted.internet import reactor

            self.flush_call = reactor.callLater(OUTBOX_GATHER_SECONDS, self._send_outbox)

    def _send_outbox(self) -> None:
        """One commit: queue the requests found, write the items scraped ahead, take the done requests out of flight,
        and take queued requests into the free slots. It lands a round trip later; the engine is woken then.

        One commit at a time: what comes meanwhile goes with the next, sent as the one under way lands. On a busy
        reactor that is several pages' worth in one script call instead of one call each."""
        if self.commits or self.failed or self.lease.lost:  # lost: a commit would rebuild half a frontier
            return
        take = self._free_slots()
        if not (self.outbox or self.items or self.done or (take and self.maybe_pending)):
            return
        sending, self.outbox = self.outbox, []
        items, self.items = self.items, []
        done, self.done = self.done, []
        self.acking += len(done)
        self.reserved += take
        task = asyncio.get_running_loop().create_task(self._commit(sending, items, done, take))
        self.commits.add(task)
        task.add_done_callback(self.commits.discard)

    def _free_slots(self) -> int:
        """Requests that may be taken into flight now: in Redis never more than CONCURRENT_REQUESTS for this shard."""
        if self.closing or self.leave:
            return 0
        return max(0, self.max_held - len(self.held) - len(self.taken) - self.reserved - self.acking)

    async def _commit(
        self, sending: list[tuple[bytes, int, bytes | None, float]], items: list[bytes], done: list[bytes], take: int
    ) -> None:
        try:
            if self.client is None:
                self.client = async_binary_redis()
            batch = {"requests": sending, "items": items, "done": done, "take": take}
            committed = await commit_patiently(
                self.frontier, self.client, stats=self.stats, patience=self.patience, **batch
            )
            if committed is None:
                self.failed = True
                return
            self.taken.extend(committed.taken)
            self.maybe_pending = committed.pending > 0
            if committed.next_due is not None:
                self._look_when_due(committed.next_due)
        except FrontierLost as exc:
            self.lease.lose("commit", ended=isinstance(exc, FrontierEnded))
            return
        except Exception:  # a bug: the request stays in flight, so stop rather than wait for it forever
            logger.exception("frontier: commit failed; stopping the crawl")
            self.stats.inc_value("trawl/infrastructure_errors")
            self.failed = True
            return
        finally:
            self.acking -= len(done)
            self.reserved -= take
            self.commits.discard(asyncio.current_task())
            self._send_outbox()  # what came while this one was under way
            wake_engine(self.crawler)  # requests taken, or a slot free
        for (payload, *_), was_queued in zip(sending, committed.queued, strict=True):
            if not was_queued:
                self.kept.pop(payload, None)  # seen by another shard first: never taken by this one
        queued = sum(committed.queued)
        # Seen by another shard first: filtered there, not here.
        self.stats.inc_value("dupefilter/filtered", len(sending) - queued)
        self.stats.inc_value("scheduler/enqueued/redis", queued)
        self.stats.inc_value("scheduler/enqueued", queued)

    def _look_when_due(self, seconds: float) -> None:
        """Take the first kept-back request when it is due, not only when another request ends or the crawl idles
        (every commit says when the earliest of the whole frontier is due)."""
        from twisted.internet import reactor

        if self.due_call is not None and self.due_call.active():
            self.due_call.cancel()
        self.due_call = reactor.callLater(seconds + 0.01, self._due)

    def _due(self) -> None:
        self.maybe_pending = True
        self._send_outbox()

    def next_request(self) -> Request | None:
        if self.local:
            self.stats.inc_value("scheduler/dequeued/memory")
            self.stats.inc_value("scheduler/dequeued")
            return self.local.popleft()
        while self.taken:
            payload = Frontier.payload(member := self.taken.popleft())
            request = self.kept.pop(payload, None)
            if request is None or request in self.held:  # a callback queued its own request again: a second object
                request = codec.decode_or_refuse(payload, self.spider, self.stats)
            if request is None:  # refused (an earlier Trawl's pickle, a child's forgery): out of flight, never run
                self.done.append(member)
                continue
            self.held[request] = member
            self.stats.inc_value("scheduler/dequeued/redis")
            self.stats.inc_value("scheduler/dequeued")
            return request
        self._send_outbox() if self.maybe_pending and self._free_slots() else self._send_soon()  # room to fill: now
        return None

    def __len__(self) -> int:
        return len(self.local) + len(self.taken) + len(self.outbox) + self.frontier.pending()

    def _finished(self, request: Request) -> None:
        member = self.held.pop(request, None)
        if member is None:
            return
        self.done.append(member)  # sent with what it yielded: in Redis before it leaves flight
        self._send_outbox()

    def _on_idle(self, spider: Spider) -> None:
        """Close only when the job is done: queue empty and no shard holding a request (see Frontier.try_finish)."""
        if self.leave:
            return
        if self.outbox or self.items or self.done or self.commits:
            self._send_outbox()
            raise DontCloseSpider("frontier: committing")  # the commit wakes the engine when it has landed
        verdict = self.frontier.try_finish()
        if verdict in ("lost", "ended"):
            self.lease.lose("the idle check", ended=verdict == "ended")
            raise DontCloseSpider(f"frontier: {verdict}")  # closing with that reason, not as finished
        self.maybe_pending = verdict == "work"
        if verdict in ("done", "last"):
            self.leave = verdict
            self.stats.set_value("frontier/leave", verdict)
            return
        if verdict == "work":  # another shard queued requests meanwhile: take them now, not at the next poll
            self._send_outbox()
            if self.commits:
                raise DontCloseSpider("frontier: taking")  # the commit wakes the engine when it has landed
        if verdict == "wait":
            self.crawler.signals.send_catch_log(signal=store_wanted)
        if self.poke is None or not self.poke.active():
            self.poke = poke_engine_later(self.crawler, IDLE_POLL_SECONDS)
        raise DontCloseSpider(f"frontier: {verdict}")
