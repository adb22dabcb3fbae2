"""A set that forgets: the per-process memory of a crawl (fingerprints a shard knows were seen, items counted) kept
to a fixed size however long the crawl runs.

It answers "seen" only for what it holds, and forgets the least recently used first, so it errs one way only: a
forgotten key is looked up again where the truth is (the frontier's seen-set in Redis, the items table), never
taken as seen when it was not. A Bloom filter would err the other way (a false "seen" drops a page) and is not used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


class RecentSet:
    """The `capacity` most recently added or found keys."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self.entries: OrderedDict[Hashable, None] = OrderedDict()

    def __contains__(self, key: Hashable) -> bool:
        if key not in self.entries:
            return False
        self.entries.move_to_end(key)  # a key found often stays
        return True

    def add(self, key: Hashable) -> None:
        self.entries[key] = None
        self.entries.move_to_end(key)
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self.entries)
