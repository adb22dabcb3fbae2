"""A crawl host is forked from a thread of a process whose other threads keep running (Celery's consumer, the pool's
readers reporting results): a lock one of them held at that instant stays held forever in the child, whose copy of
that thread does not exist. Two things keep the child clear of that.

- The pool's own threads report to Celery (which stores results through the result backend) only while no fork is
  under way: `CrawlHostPool.reporting` (project.pools.crawlhost).
- Python 3.11's `functools.cached_property`, and kombu's subclass of it, hold one lock per *descriptor*, shared by
  every instance of the class (Celery's `RedisBackend.client` among them): a thread of the parent reading any
  backend's client at the fork would keep the child's task threads waiting on their first result for ever. The child
  gives every such descriptor a new lock before it runs anything.
"""

from __future__ import annotations

import functools
import threading


def cached_property_locks_renewed() -> int:
    """In a freshly forked child: a new lock for every class's cached_property that has one; returns how many."""
    renewed, seen, classes = 0, {object}, [object]
    while classes:
        cls = classes.pop()
        for sub in type.__subclasses__(cls):
            if sub not in seen:
                seen.add(sub)
                classes.append(sub)
        for value in list(vars(cls).values()):
            if isinstance(value, functools.cached_property) and hasattr(value, "lock"):
                value.lock = threading.RLock()
                renewed += 1
    return renewed
