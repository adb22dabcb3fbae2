"""Proxy rotation: round-robin over a group's enabled proxies, skipping those cooling down after a site blocked them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from project.web.unavailable import unavailable_dependency

logger = logging.getLogger("trawl.throttle")

PROXY_META = ("proxy", "trawl_proxy", "trawl_egress")


@dataclass
class ProxyEntry:
    url: str
    label: str  # the egress IP this proxy leaves from: the per-IP throttle bucket is keyed on it
    cooling_until: float = 0.0  # unix time; 0 when the proxy is not resting


class ProxyPool:
    """Plain values, no I/O: the middleware refreshes it from the database and reports blocks to it."""

    def __init__(self, entries: Iterable[ProxyEntry] = ()) -> None:
        self.entries = list(entries)
        self._turn = 0

    def __len__(self) -> int:
        return len(self.entries)

    def pick(self, now: float) -> ProxyEntry | None:
        """The next proxy not cooling down; if every one is, the one that has rested longest. None without proxies."""
        if not self.entries:
            return None
        ready = [entry for entry in self.entries if entry.cooling_until <= now]
        if not ready:
            return min(self.entries, key=lambda entry: entry.cooling_until)
        self._turn += 1
        return ready[self._turn % len(ready)]

    def cool(self, url: str, until: float) -> None:
        for entry in self.entries:
            if entry.url == url:
                entry.cooling_until = max(entry.cooling_until, until)

    def replace(self, entries: Iterable[ProxyEntry]) -> None:
        """New entries from the database; a cool-down this process set and the database does not show yet stays."""
        local = {entry.url: entry.cooling_until for entry in self.entries}
        self.entries = [
            ProxyEntry(entry.url, entry.label, max(entry.cooling_until, local.get(entry.url, 0.0))) for entry in entries
        ]


class SharedLoads:
    """A group's proxies loaded once for every crawl of the process that reads them within `max_age` seconds.

    Each crawl refreshing its own pool every TRAWL_PROXY_REFRESH_SECONDS opened a database connection for it: a
    process of 50 crawls opened five a second, most of them to read an empty pool (bench/README.md, "Density"). Runs
    on the reactor's loop; a load under way is awaited by every crawl that asks meanwhile."""

    def __init__(self) -> None:
        self._kept: dict[tuple[Callable, str], tuple[float, list[ProxyEntry]]] = {}  # (load, group) → (when, entries)
        self._under_way: dict[tuple[Callable, str], asyncio.Task] = {}

    async def entries(self, load: Callable[..., list[ProxyEntry]], group: str, *, max_age: float) -> list[ProxyEntry]:
        """The group's proxies as `load` read them at most `max_age` seconds ago (0: a load that starts now, or one
        under way). Shared: `ProxyPool.replace` copies them."""
        key = (load, group)
        kept = self._kept.get(key)
        if kept is not None and time.monotonic() - kept[0] < max_age:
            return kept[1]
        task = self._under_way.get(key)
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = self._under_way[key] = asyncio.ensure_future(self._load(key, load, group))
        return await asyncio.shield(task)  # a crawl dropping its request must not cancel the others' load

    async def _load(self, key: tuple[Callable, str], load: Callable[..., list[ProxyEntry]], group: str) -> list:
        started = time.monotonic()
        try:
            entries = await asyncio.to_thread(load, group=group)
        finally:
            if self._under_way.get(key) is asyncio.current_task():
                del self._under_way[key]
        self._kept[key] = (started, entries)
        return entries


shared_loads = SharedLoads()


def proxies_load(*, group: str) -> list[ProxyEntry]:
    """The enabled proxies of a group ("" is the default pool) from the database. Run in a thread, never the reactor."""
    from django.db import connection

    from throttling.models import Proxy

    try:
        rows = Proxy.objects.filter(enabled=True, group=group).order_by("egress_label", "url")
        return [
            ProxyEntry(row.url, row.egress_label, row.cooling_down_until.timestamp() if row.cooling_down_until else 0.0)
            for row in rows
        ]
    finally:
        connection.close()  # a thread of the pool: no connection kept between its rare reads (docs/deploy.md)


class ProxyRotationMiddleware:
    """Send each request through the next proxy of the crawl's group that is not cooling down.

    The group is the spider config's `proxy_group` (a source's config or a job's `options.config`), else the
    TRAWL_PROXY_GROUP setting ("" is the default pool). A response that looks blocked (a ban status or a captcha
    marker) cools its proxy down for everyone and, a few times, sends the request again through another proxy.
    A request whose spider set `meta["proxy"]` itself, or set `meta["dont_proxy"]`, is left alone.
    """

    def __init__(
        self,
        *,
        group: str,
        stats: StatsCollector,
        cooldown: float = 600.0,
        ban_statuses: tuple[int, ...] = (403, 429),
        ban_markers: tuple[str, ...] = (),
        refresh_seconds: float = 10.0,
        max_rotations: int = 2,
        load: Callable[..., list] = proxies_load,
        cool: Callable[..., None] | None = None,
    ) -> None:
        self.group = group
        self.stats = stats
        self.cooldown = cooldown
        self.ban_statuses = set(ban_statuses)
        self.ban_markers = tuple(marker.lower().encode() for marker in ban_markers)
        self.refresh_seconds = refresh_seconds
        self.max_rotations = max_rotations
        self.load = load
        self.cool = cool or _cool_down
        self.pool = ProxyPool()
        self._refreshed_at = float("-inf")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyRotationMiddleware:
        middleware = cls(**proxy_options(crawler), stats=crawler.stats)
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        return middleware

    async def spider_opened(self, spider: Spider) -> None:
        self.group = (getattr(spider, "config", None) or {}).get("proxy_group") or self.group
        await self._refresh(force=True)

    async def process_request(self, request: Request) -> None:
        meta = request.meta
        if meta.get("dont_proxy") or ("proxy" in meta and meta["proxy"] != meta.get("trawl_proxy")):
            return None
        await self._refresh()
        entry = self.pool.pick(time.time())
        if entry is None:
            return None
        meta.update(proxy=entry.url, trawl_proxy=entry.url, trawl_egress=entry.label)
        self.stats.inc_value("proxy/requests")
        return None

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        url = request.meta.get("trawl_proxy")
        if not url or not self._looks_blocked(response):
            return response
        self.pool.cool(url, time.time() + self.cooldown)
        self.stats.inc_value("proxy/cooled_down")
        try:
            await asyncio.to_thread(self.cool, url=url, seconds=self.cooldown)
        except Exception as exc:
            if unavailable_dependency(exc) is None:
                raise
            # The database away: this process cools the proxy down all the same; the others will not know.
            logger.warning("proxies: the cool-down of %s could not be shared (%s)", url, exc)
        rotations = request.meta.get("trawl_proxy_rotations", 0)
        if rotations >= self.max_rotations or len(self.pool) < 2:
            return response
        self.stats.inc_value("proxy/rotated")
        meta = {key: value for key, value in request.meta.items() if key not in PROXY_META}
        retry = request.replace(meta={**meta, "trawl_proxy_rotations": rotations + 1}, dont_filter=True)
        retry.headers.pop(b"Proxy-Authorization", None)
        return retry

    def _looks_blocked(self, response: Response) -> bool:
        if response.status in self.ban_statuses:
            return True
        head = response.body[:65536].lower() if self.ban_markers else b""
        return any(marker in head for marker in self.ban_markers)

    async def _refresh(self, *, force: bool = False) -> None:
        # Its first pool is read now (a crawl's start). Later, every half period, it takes what a crawl of the process
        # read less than half a period ago: a change is seen within a period, as when each crawl read its own.
        half = self.refresh_seconds / 2
        if not force and time.monotonic() - self._refreshed_at < half:
            return
        max_age = 0.0 if force or self._refreshed_at == float("-inf") else half
        self._refreshed_at = time.monotonic()  # set first: concurrent requests must not refresh too
        try:
            entries = await shared_loads.entries(self.load, self.group, max_age=max_age)
        except Exception as exc:
            if force or unavailable_dependency(exc) is None:
                raise
            # The database away (restarting): the pool this crawl loaded is still good. Failing the request instead
            # would make the frontier count it done, never fetched.
            self.stats.inc_value("proxy/refresh_errors")
            logger.warning("proxies: the pool could not be refreshed (%s); keeping the one loaded before", exc)
            return
        self.pool.replace(entries)


def proxy_options(crawler: Crawler) -> dict[str, Any]:
    """ProxyRotationMiddleware's arguments from the crawl's settings (a scraper or version may set any of them)."""
    settings = crawler.settings
    if not settings.getbool("TRAWL_PROXY_ENABLED"):
        raise NotConfigured
    return {
        "group": settings.get("TRAWL_PROXY_GROUP"),
        "cooldown": settings.getfloat("TRAWL_PROXY_COOLDOWN"),
        "ban_statuses": tuple(settings.getlist("TRAWL_PROXY_BAN_STATUSES")),
        "ban_markers": tuple(settings.getlist("TRAWL_PROXY_BAN_MARKERS")),
        "refresh_seconds": settings.getfloat("TRAWL_PROXY_REFRESH_SECONDS"),
    }


def _cool_down(*, url: str, seconds: float) -> None:
    from django.db import connection

    from throttling.services import proxy_cool_down

    try:
        proxy_cool_down(url=url, seconds=seconds)
    finally:
        connection.close()  # a thread of the pool: no connection kept between its rare reads (docs/deploy.md)
