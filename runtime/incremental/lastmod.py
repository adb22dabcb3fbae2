"""What each sitemap entry's `lastmod` was at a source's last run, so the next run skips the entries it already has.

One Redis hash per source (url → lastmod), read once when the crawl starts and written when it finishes: only a crawl
that finished writes, so a failed run never hides changes from the next one. Entries without a lastmod, or with one
that cannot be read, are always taken. Off like the HTTP cache (runtime/incremental/cache.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scrapy.crawler import Crawler

from project.redis import REDIS_SETTING, loop_redis
from runtime.incremental.cache import SCOPE_SETTING, incremental_on


def lastmod_value(text: str) -> datetime | None:
    """A W3C datetime (`2026-11-23`, `2026-11-23T09:00:00+00:00`, `...Z`) as an aware datetime, or None."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except (AttributeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class LastmodMemory:
    def __init__(self, *, redis_url: str, key: str, ttl: int) -> None:
        self.redis_url = redis_url
        self.key = key
        self.ttl = ttl
        self.known: dict[str, datetime] = {}
        self.seen: dict[str, str] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LastmodMemory | None:
        if not incremental_on(crawler.settings):
            return None
        ttl = crawler.settings.getint("TRAWL_INCREMENTAL_TTL")
        key = f"{crawler.settings.get(SCOPE_SETTING)}:lastmod"
        return cls(redis_url=crawler.settings.get(REDIS_SETTING), key=key, ttl=ttl)

    async def load(self) -> None:
        stored = await loop_redis(self.redis_url).hgetall(self.key)
        self.known = {url: value for url, text in stored.items() if (value := lastmod_value(text)) is not None}

    def unchanged(self, url: str, lastmod: Any) -> bool:
        """True when the last run saw `url` with a lastmod at least this recent. Remembers it either way."""
        value = lastmod_value(lastmod) if isinstance(lastmod, str) else None
        if value is None:
            return False
        self.seen[url] = lastmod
        before = self.known.get(url)
        return before is not None and value <= before

    async def save(self) -> None:
        if not self.seen:
            return
        async with loop_redis(self.redis_url).pipeline(transaction=True) as pipe:
            pipe.hset(self.key, mapping=self.seen)
            pipe.expire(self.key, self.ttl)
            await pipe.execute()
