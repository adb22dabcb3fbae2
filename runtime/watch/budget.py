"""A job's size bounds, `max_pages` and `max_items` (runtime.settings.compose maps them onto Scrapy's
CLOSESPIDER_PAGECOUNT and CLOSESPIDER_ITEMCOUNT), made exact.

Scrapy's CloseSpider closes the crawl once it counted that many responses or items, but the requests already in
flight still finish and their items still pass: `max_pages: 5` at 16 concurrent requests fetches up to 20 pages. So:

- `PageBudget`, a downloader middleware, lets at most CLOSESPIDER_PAGECOUNT requests of the spider's leave (a retry
  or a redirect is a fetch too) and refuses the rest (IgnoreRequest, stat `budget/refused_pages`). A crawl on a job's
  frontier counts in the frontier (Redis), so the bound is the job's, whatever its attempts and shards: a requeued
  attempt (its worker killed) or a second shard sends only what the others left, and the first request past the
  bound closes the crawl (`closespider_pagecount`), the requests in flight finishing first (`JobCount`);
- `BudgetCloseSpider` replaces Scrapy's CloseSpider (EXTENSIONS_BASE, runtime.settings.enforced): it counts the
  spider's pages only, not Scrapy's own robots.txt fetches, so `max_pages: 5` is five pages of the site;
- `ItemBudget`, an item pipeline in every crawl, drops the items past CLOSESPIDER_ITEMCOUNT (stat
  `budget/dropped_items`), counted like pages: the job's, on its frontier.

The crawl then ends with Scrapy's reason (`closespider_pagecount`, `closespider_itemcount`) and the job succeeds;
`closed_by` names the job option behind it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from scrapy import Request, Spider
from scrapy.exceptions import DropItem, IgnoreRequest, NotConfigured
from scrapy.extensions.closespider import CloseSpider
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import deferred_from_coro

from runtime.frontier.dupefilter import frontier_for

PAGES_SETTING, ITEMS_SETTING = "CLOSESPIDER_PAGECOUNT", "CLOSESPIDER_ITEMCOUNT"
PAGES_OPTION, ITEMS_OPTION = "max_pages", "max_items"
PAGES_REASON, ITEMS_REASON = "closespider_pagecount", "closespider_itemcount"  # Scrapy's CloseSpider's
# A crawl's time from its start: Scrapy's own CLOSESPIDER_TIMEOUT, which BudgetCloseSpider keeps as it is.
SECONDS_SETTING, SECONDS_OPTION, SECONDS_REASON = "CLOSESPIDER_TIMEOUT", "max_seconds", "closespider_timeout"
CLOSED_BY = {PAGES_REASON: PAGES_OPTION, ITEMS_REASON: ITEMS_OPTION, SECONDS_REASON: SECONDS_OPTION}
FRONTIER_SETTING = "TRAWL_FRONTIER"  # the job's frontier a crawl runs on (runtime.frontier)
PAGE_BUDGET = "runtime.watch.budget.PageBudget"
PAGE_BUDGET_ORDER = 120  # after robots.txt (100): a request robots.txt forbids was never going to be fetched
ITEM_BUDGET = "runtime.watch.budget.ItemBudget"
ITEM_BUDGET_ORDER = 10**9 - 0.5  # between the item bounds and the handoff: counts only items that reach the job
SCRAPY_CLOSESPIDER = "scrapy.extensions.closespider.CloseSpider"
BUDGET_CLOSESPIDER = "runtime.watch.budget.BudgetCloseSpider"


def closed_by(finish_reason: str) -> str:
    """The job option that closed a crawl ("" when none did)."""
    return CLOSED_BY.get(finish_reason or "", "")


def scrapy_internal(request: Request) -> bool:
    """Scrapy's own fetches (robots.txt) have no callback: they are not the spider's pages."""
    return request.callback is NO_CALLBACK


class JobCount:
    """One of a job's bounds, counted by this crawl and, on a job's frontier, by the job (every attempt and shard):
    `take()` counts one more and says whether it is within the bound; the first one past it closes the crawl with
    Scrapy's `reason`, the requests in flight finishing first."""

    def __init__(self, *, budget: int, crawler: Any, reason: str, shared: Callable[[], int] | None = None) -> None:
        self.budget = budget
        self.crawler = crawler
        self.reason = reason
        self.shared = shared  # counts one for the job and answers the job's count so far (None: this crawl's only)
        self.taken = 0
        self.closing = False

    @classmethod
    def of(cls, crawler: Any, *, setting: str, what: str, reason: str) -> JobCount:
        budget = crawler.settings.getint(setting)
        if budget <= 0:
            raise NotConfigured
        shared = None
        if crawler.settings.getdict(FRONTIER_SETTING).get("job"):
            frontier = frontier_for(crawler.settings)
            shared = partial(frontier.budget_count, what)
        return cls(budget=budget, crawler=crawler, reason=reason, shared=shared)

    def take(self) -> bool:
        if self.taken >= self.budget or (self.shared is not None and self.shared() > self.budget):
            self._close()
            return False
        self.taken += 1
        return True

    def _close(self) -> None:
        """Spent by an earlier attempt or another shard too, which this crawl's own CloseSpider count does not see."""
        if self.closing or self.shared is None:
            return  # this crawl's own bound: BudgetCloseSpider closes it at its last response or item
        self.closing = True
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy 2.19's answer before the crawl started: nothing to close yet
            return
        if hasattr(engine, "close_spider_async"):  # Scrapy 2.13+ (a packaged version may pin an older one)
            deferred_from_coro(engine.close_spider_async(reason=self.reason))
        else:
            engine.close_spider(engine.spider, self.reason)


class PageBudget:
    def __init__(self, count: JobCount, stats: Any) -> None:
        self.count = count
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> PageBudget:
        return cls(JobCount.of(crawler, setting=PAGES_SETTING, what="pages", reason=PAGES_REASON), crawler.stats)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if scrapy_internal(request):
            return
        if not self.count.take():
            self.stats.inc_value("budget/refused_pages")
            raise IgnoreRequest(f"past the job's max_pages ({self.count.budget})")


class BudgetCloseSpider(CloseSpider):
    def page_count(self, response: Response, request: Request, spider: Spider) -> None:
        if scrapy_internal(request):
            return
        super().page_count(response, request, spider)


class ItemBudget:
    def __init__(self, count: JobCount, stats: Any) -> None:
        self.count = count
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> ItemBudget:
        return cls(JobCount.of(crawler, setting=ITEMS_SETTING, what="items", reason=ITEMS_REASON), crawler.stats)

    def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        if not self.count.take():
            self.stats.inc_value("budget/dropped_items")
            raise DropItem(f"past the job's max_items ({self.count.budget})")
        return item
