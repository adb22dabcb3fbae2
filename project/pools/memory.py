"""Which crawl of a crawl host grew it past worker_max_memory_per_child.

The process measures only its whole resident memory. When it is past the bound every crawl hands its work back, and
the one that grew it should spend an attempt (a job that does it on every attempt ends `memory_exceeded`) while the
others lose nothing. Each running crawl registers a weigher: the bytes its spider holds, found by walking what the
spider object refers to (its attributes, the lists and dicts in them), never past objects every crawl shares (modules,
classes, functions, the crawler). A crawl holding at least SUSPECT_SHARE of what the process grew since it was idle
is a suspect; when none does (the memory is held where no spider refers to it), every crawl is, so a job that grows
every process it runs in still ends.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger("trawl.pool")
SUSPECT_SHARE = 0.5
WALK_BUDGET = 200_000  # objects visited per crawl at most: a weighing is done once, as the process is replaced
_SHARED = (
    types.ModuleType,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
    logging.Logger,
    logging.LoggerAdapter,
)

_weighers: dict[str, Callable[[], Any]] = {}  # crawl → its spider (None before it exists)
_lock = threading.Lock()
_suspects: set[str] | None = None  # decided when the bound is passed; None: every crawl


@contextlib.contextmanager
def crawl_weighed(key: str, spider: Callable[[], Any]) -> Iterator[None]:
    """While a crawl runs (`key`: its job and shard): `spider()` answers its spider object, or None."""
    with _lock:
        _weighers[key] = spider
    try:
        yield
    finally:
        with _lock:
            _weighers.pop(key, None)


def suspects_find(grown_bytes: int) -> set[str] | None:
    """Weigh every registered crawl; the ones holding at least SUSPECT_SHARE of `grown_bytes`, or None for all."""
    global _suspects
    with _lock:
        weighers = dict(_weighers)
    weights = {key: spider_bytes(spider()) for key, spider in weighers.items()}
    heavy = {key for key, weight in weights.items() if weight >= SUSPECT_SHARE * grown_bytes}
    _suspects = heavy or None
    logger.warning(
        "crawl host grew %d MiB since it was idle; its crawls' spiders hold %s MiB: %s",
        grown_bytes >> 20,
        {key: weight >> 20 for key, weight in weights.items()},
        f"{', '.join(sorted(heavy))} grew it" if heavy else "none of them holds it: every crawl counts it",
    )
    return _suspects


def memory_suspect(key: str) -> bool:
    """Whether this crawl is charged with the process's growth (every crawl when none could be named)."""
    return _suspects is None or key in _suspects


def spider_bytes(spider: Any) -> int:
    """The bytes reachable from the spider's own attributes, shared objects and the crawler left out."""
    if spider is None:
        return 0
    crawler = getattr(spider, "crawler", None)
    seen = {id(spider), id(crawler), id(getattr(crawler, "settings", None))}
    pending, total, visited = list(getattr(spider, "__dict__", {}).values()), 0, 0
    while pending and visited < WALK_BUDGET:
        obj = pending.pop()
        if id(obj) in seen or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        visited += 1
        total += sys.getsizeof(obj, 0)
        pending.extend(gc.get_referents(obj))
    return total
