"""Stopping a crawl now (cancel, timeout, warm shutdown, lost job), in a worker's reactor and in a packaged child.

Scrapy's own stop (`crawler.stop()`) is graceful: the engine stops asking its scheduler for requests, then waits for
every request it already handed to the downloader. With `DOWNLOAD_DELAY` those include the requests waiting in a
downloader slot's queue for their turn, sent one delay apart: a cancelled crawl with DOWNLOAD_DELAY = 2 and eight
requests queued went on fetching for 16 s more. `crawl_stop` drops those before they leave (they fail with
CrawlClosing, as the throttle drops the requests still waiting for a token); only the requests already being
transferred finish. A dropped request was never answered, so it is not done for the frontier
(runtime.frontier.engine_hooks): it stays in flight there, and a warm shutdown's release or the next attempt's reclaim
puts it back in the queue; a cancelled job's frontier is deleted with it. What the frontier's scheduler takes into
flight meanwhile (a finished request's commit takes another) stays there the same way: the stopped engine asks it
for nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from scrapy import signals

from throttling.crawling import CrawlClosing, crawl_closing

logger = logging.getLogger("trawl.jobs")


async def crawl_stop(crawler: Any) -> None:
    """`crawler.stop_async()`, without fetching what waits in the downloader's delay queues."""
    stopping = asyncio.ensure_future(crawler.stop_async())
    # One turn of the loop: the stop has run up to its first wait, so the engine takes no more requests and a dropped
    # request's freed place is not filled from the scheduler again.
    await asyncio.sleep(0)
    dropped = queued_downloads_drop(crawler)
    if dropped:
        logger.info("stopping: %d request(s) waiting for their download delay dropped, not sent", dropped)
    # A request still in the downloader middlewares (the throttle granting its token now) joins a slot's queue after
    # that: dropped too, as soon as it is there.
    loop = asyncio.get_running_loop()

    def drop_late(request: Any, spider: Any) -> None:
        loop.call_soon(queued_downloads_drop, crawler)

    crawler.signals.connect(drop_late, signal=signals.request_reached_downloader, weak=False)
    try:
        await stopping
    finally:
        crawler.signals.disconnect(drop_late, signal=signals.request_reached_downloader)


def queued_downloads_drop(crawler: Any) -> int:
    """Fail every request waiting in a downloader slot's queue (not the ones being transferred) with CrawlClosing;
    the number dropped. Only once the crawl is closing: before, the engine would send others in their place."""
    engine = getattr(crawler, "_engine", None)  # Crawler.engine raises before the crawl starts
    if engine is None or not crawl_closing(crawler):
        return 0
    dropped = 0
    for slot in list(engine.downloader.slots.values()):
        while slot.queue:
            request, waiting = slot.queue.popleft()
            dropped += 1
            waiting.errback(CrawlClosing(f"the crawl is stopping: {request.url} was waiting for its download delay"))
    if dropped:
        crawler.stats.inc_value("downloader/dropped_closing", dropped)
    return dropped
