"""What the frontier scheduler (runtime.frontier.scheduler) needs from Scrapy's engine beyond the scheduler API: to
hear when the engine is done with a request, and to wake an idle engine."""

from __future__ import annotations

import weakref
from typing import Any

from scrapy import Request, signals

# In the meta of a request whose download failed because Trawl's own Redis or database was away
# (runtime.watch.outages): not done, whatever the engine says.
OUTAGE_META = "trawl_outage"
# Sent when the crawl is idle but may not end yet because written-ahead items are not stored (or another shard still
# holds requests): whoever stores this crawl's items (runtime.bridge.runner) should do it now, not at its next tick.
store_wanted = object()


def on_request_finished(crawler: Any, callback: Any) -> None:
    """Call `callback(request)` when the engine is done with a scheduled request: after its download, its callback's
    output and its items. Scrapy has no signal for that moment; the engine's slot forgets the request then.

    While the crawl is being stopped (cancel, timeout, Redis or the database away, shutdown) the engine also lets go
    of requests it never fetched — the throttle drops those still waiting for a token. Those are not done: they stay
    in flight in the frontier, and the next attempt (or a live shard) fetches them. Only requests that got a response
    count then. Nor is a request whose download failed because Trawl's own Redis or database was away (OUTAGE_META),
    at any time."""
    slot = getattr(crawler.engine, "_slot", None)
    remove = getattr(slot, "remove_request", None)
    if remove is None:  # a Scrapy without that slot: a request counts as done when it leaves the downloader
        crawler.signals.connect(
            lambda request, spider: callback(request), signal=signals.request_left_downloader, weak=False
        )
        return
    answered: weakref.WeakSet[Request] = weakref.WeakSet()
    crawler.signals.connect(
        lambda response, request, spider: answered.add(request), signal=signals.response_received, weak=False
    )

    def remove_request(request: Request) -> None:
        try:
            if (slot.closing is None or request in answered) and not request.meta.get(OUTAGE_META):
                callback(request)
        finally:
            remove(request)

    slot.remove_request = remove_request


def wake_engine(crawler: Any) -> None:
    """Ask the engine to look for requests now, not at its 5-second heartbeat."""
    slot = getattr(crawler.engine, "_slot", None)
    if slot is not None and slot.closing is None:
        slot.nextcall.schedule()


def poke_engine_later(crawler: Any, delay: float) -> Any:
    """Wake the engine in `delay` seconds: other shards queue work."""
    from twisted.internet import reactor

    return reactor.callLater(delay, wake_engine, crawler)


def close_spider_soon(crawler: Any, reason: str) -> None:
    """Close the crawl's spider with `reason` (from the reactor thread); a crawl already closing keeps its reason."""
    from scrapy.utils.defer import deferred_from_coro

    engine = crawler.engine
    if engine is None or getattr(engine, "_slot", None) is None:
        return
    deferred_from_coro(engine.close_spider_async(reason=reason)).addErrback(lambda failure: None)
