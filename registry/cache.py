"""The per-process cache of routable versions, and the Redis counter that tells every process to drop it.

Every registry write bumps one counter in Redis once its transaction commits (`registry_changed`). A process keeps
the active versions of each scraper it routed, tagged with the counter value it read before loading them, and trusts
an entry only while the counter still has that value. It reads the counter (one GET) at most every
`TRAWL_ROUTING_CHECK_SECONDS` (0: before every route), so a change reaches every worker that quickly — not after a
fixed TTL. `TRAWL_ROUTING_CACHE_MAX_AGE` is only a backstop for writes made behind the services' back
(`QuerySet.update` in a shell) that bumped nothing.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from project.redis import get_redis, redis_key

logger = logging.getLogger("trawl.registry")


def generation_key() -> str:
    return redis_key("registry", "generation")


def generation_read() -> str | None:
    """The registry's change counter, or None when Redis cannot say (then nothing is cached)."""
    try:
        return get_redis().get(generation_key()) or "0"
    except redis.RedisError as exc:
        logger.warning("routing cache bypassed: cannot read %s: %s", generation_key(), exc)
        return None


@dataclass
class _Entry:
    value: Any
    generation: str
    loaded_at: float


class VersionCache:
    """Values per key (scraper id), valid while the Redis counter keeps the value read before they were loaded."""

    def __init__(
        self,
        *,
        check_every: float,
        max_age: float,
        read_generation: Callable[[], str | None] = generation_read,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.check_every = check_every
        self.max_age = max_age
        self.read_generation = read_generation
        self.clock = clock
        self._entries: dict[Any, _Entry] = {}
        self._generation: str | None = None
        self._checked_at = float("-inf")
        self._lock = threading.Lock()

    def get(self, key: Any, load: Callable[[], Any]) -> Any:
        # Inside a transaction the caller must read its own (maybe uncommitted) writes, and those must never be
        # cached for others: the database answers.
        if transaction.get_connection().in_atomic_block:
            return load()
        generation = self._current_generation()
        if generation is None:
            return load()
        now = self.clock()
        entry = self._entries.get(key)
        if entry is not None and entry.generation == generation and now - entry.loaded_at < self.max_age:
            return entry.value
        # The counter was read before loading: a write committed meanwhile has bumped it, so this entry is dropped
        # at the next check instead of being trusted for good.
        value = load()
        self._entries[key] = _Entry(value, generation, now)
        return value

    def clear(self) -> None:
        """Forget everything and read the counter again before the next answer."""
        with self._lock:
            self._entries.clear()
            self._checked_at = float("-inf")

    def _current_generation(self) -> str | None:
        now = self.clock()
        with self._lock:
            if now - self._checked_at >= self.check_every or self._generation is None:
                generation = self.read_generation()
                if generation != self._generation:
                    # Older entries can never be trusted again (even if a flushed Redis restarts the count).
                    self._entries.clear()
                self._generation, self._checked_at = generation, now
            return self._generation


@functools.cache
def version_cache() -> VersionCache:
    return VersionCache(
        check_every=float(settings.TRAWL_ROUTING_CHECK_SECONDS), max_age=float(settings.TRAWL_ROUTING_CACHE_MAX_AGE)
    )


def generation_bump() -> None:
    version_cache().clear()
    try:
        get_redis().incr(generation_key())
    except redis.RedisError as exc:
        # Other processes keep their copy until the backstop age; routing itself still works.
        logger.error("registry change not announced (%s): other workers may route on old versions for a while", exc)


def registry_changed() -> None:
    """A scraper or version changed: this process forgets now; every process once the change is committed."""
    version_cache().clear()
    transaction.on_commit(generation_bump, robust=True)


def on_registry_saved(sender: type, **kwargs: Any) -> None:
    """post_save / post_delete receiver: any write, even one made outside the services, invalidates the cache."""
    registry_changed()
