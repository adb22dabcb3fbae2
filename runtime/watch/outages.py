"""A request that failed because Trawl's own Redis or database was away is not done: it stays in flight in the job's
frontier, and the crawl stops so that the job is requeued and its next attempt fetches it.

Downloader middlewares that need Redis or the database wait an outage out (the throttle, for
TRAWL_INFRA_PATIENCE_SECONDS) or carry on without them (a proxy pool refresh, the incremental cache). Past that
patience, or in a component that does neither, the exception fails the download as a site's error would, and the
engine lets go of the request: the frontier scheduler counted it done and the page was never fetched. A job then ended
`succeeded` short of its site (the mixed chaos soak: a wide crawl 10-117 pages short after PostgreSQL restarted while
the throttle reloaded its rules). `OutageGuard` marks such a request (runtime.frontier.engine_hooks keeps it in flight),
counts `trawl/infrastructure_errors` (the job is requeued as an infrastructure failure, crawls.services.execution) and
stops the crawl: a shard that holds a request it will never finish could not end by itself.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request

from project.errors import InfrastructureUnavailable
from runtime.frontier.engine_hooks import OUTAGE_META, close_spider_soon
from throttling.crawling import dependency_away

logger = logging.getLogger("trawl.jobs")

OUTAGE_REASON = "trawl_infrastructure"  # the spider's close reason


def is_outage(exception: BaseException) -> bool:
    """Trawl's own Redis or database away (or given up on): nothing the site did."""
    if isinstance(exception, InfrastructureUnavailable):
        return True
    return isinstance(exception, Exception) and dependency_away(exception) is not None


class OutageGuard:
    """Downloader middleware, the first to see a failed download (the highest order of Trawl's)."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> OutageGuard:
        return cls(crawler)

    def process_exception(self, request: Request, exception: BaseException) -> None:
        if not is_outage(exception):
            return None
        request.meta[OUTAGE_META] = f"{type(exception).__name__}: {exception}"
        self.crawler.stats.inc_value("trawl/infrastructure_errors")
        logger.error(
            "%s failed because Trawl's own Redis or database is away (%s): it stays in flight, the crawl stops and "
            "the job is requeued",
            request,
            exception,
        )
        close_spider_soon(self.crawler, OUTAGE_REASON)
        return None
