"""A frontier crawl's hold on its shard of the job (runtime.frontier.scheduler): the lease, renewed by a thread of its
own rather than the reactor, and what happens when the job's frontier turns out lost."""

from __future__ import annotations

import logging
from typing import Any

from scrapy.exceptions import CloseSpider

from runtime.frontier import ENDED, Frontier, FrontierLost, LeaseKeeper
from runtime.frontier.engine_hooks import close_spider_soon

logger = logging.getLogger("trawl.frontier")

LOST_REASON = "frontier_lost"  # the spider's close reason when the job's frontier is gone from Redis
ENDED_REASON = "trawl_job_ended"  # a shard that started after its job ended


class ShardLease:
    def __init__(self, crawler: Any, frontier: Frontier) -> None:
        self.crawler = crawler
        self.frontier = frontier
        self.stats = crawler.stats
        self.keeper: LeaseKeeper | None = None
        self.lost = False  # the job's frontier is gone from Redis: the crawl stops, the job starts again

    def take(self) -> None:
        """Take the lease (reclaiming what earlier attempts and dead shards held) and keep it until `stop`. Raises
        CloseSpider if the job has ended or its frontier is lost. A crawl started outside a job's task (tests) opens
        the frontier here; a shard's task opened it already (crawls.services.shards)."""
        if not self.frontier.epoch and not self.frontier.open(create=True):
            raise CloseSpider(ENDED_REASON)
        try:
            reclaimed = self.frontier.renew()
        except FrontierLost:
            self.lose("open", close=False)
            raise CloseSpider(LOST_REASON) from None
        if reclaimed == ENDED:
            raise CloseSpider(ENDED_REASON)
        self.reclaimed(reclaimed, "of earlier attempts or dead shards")
        self._keep()

    def _keep(self) -> None:
        """Renew every third of the lease on a thread: a reactor held longer than the lease (a full item queue while
        the database stalls, a long callback) must not make this shard look dead to the others, which would fetch
        its requests again. What the thread hears goes to the reactor (stats and the engine are the reactor's)."""
        from twisted.internet import reactor

        self.keeper = LeaseKeeper(
            self.frontier.renew,
            every=max(0.2, self.frontier.lease_ms / 3000),
            on_reclaimed=lambda count: reactor.callFromThread(self.reclaimed, count, "of a dead shard"),
            on_lost=lambda: reactor.callFromThread(self.lose, "lease renewal"),
            name=f"frontier-lease-{self.frontier.job_id}-{self.frontier.member}",
        )
        self.keeper.start()

    def reclaimed(self, count: int, whose: str) -> None:
        if count > 0:
            logger.info("frontier: %s request(s) %s back in the queue", count, whose)
            self.stats.inc_value("frontier/reclaimed", count)

    def lose(self, where: str, *, close: bool = True, ended: bool = False) -> None:
        """The job's frontier is gone from Redis (emptied or restarted without its data; seen at `where`): what this
        shard still knows is a part of the site, not the job. Stop; the task requeues the job to start again, and
        the stats say why (`trawl/infrastructure_errors` is what the task checks). `ended`: the job ended meanwhile
        (another shard ended it), its frontier with it: stop as well, nothing went wrong."""
        if self.lost:
            return
        self.lost = True
        self.stop()
        if ended:
            logger.info("frontier: the job has ended (seen at %s); stopping the crawl", where)
            if close:
                close_spider_soon(self.crawler, ENDED_REASON)
            return
        logger.error("frontier: the job's frontier is gone from Redis (seen at %s); stopping the crawl", where)
        self.stats.set_value("frontier/lost", 1)
        self.stats.inc_value("trawl/infrastructure_errors")
        if close:
            close_spider_soon(self.crawler, LOST_REASON)

    def stop(self) -> None:
        if self.keeper is not None:
            self.keeper.stop()
