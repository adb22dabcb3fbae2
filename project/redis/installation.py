"""Which Trawl installation this is: the id that namespaces every Redis key (project.redis.redis_key).

Derived from the database, so a fresh database on a Redis that another Trawl (or an earlier run) used starts with
empty counters, caches and flags instead of reading theirs: the id is a hash of when the database's first migration
was applied. `TRAWL_INSTALLATION_ID` pins it (two databases meant to share Redis state, or a process with no database
access, such as a packaged crawl's child, which gets it from its parent).
"""

from __future__ import annotations

import concurrent.futures
import hashlib

from django.conf import settings
from django.core.exceptions import SynchronousOnlyOperation
from django.db import DEFAULT_DB_ALIAS, connection

_known: dict[tuple, str] = {}


def installation_id() -> str:
    """Eight hex digits, the same in every process of one installation; read once per process and database."""
    if settings.TRAWL_INSTALLATION_ID:
        return settings.TRAWL_INSTALLATION_ID
    # The default database's settings (the dict its connection reads) rather than the connection's: every Redis key
    # asks, and a thread's connection is looked up through asgiref's context-aware Local each time.
    database = settings.DATABASES[DEFAULT_DB_ALIAS]
    key = (database.get("ENGINE"), database.get("NAME"), database.get("HOST"), database.get("PORT"))
    if key not in _known:
        _known[key] = _derive()
    return _known[key]


def installation_forget() -> None:
    """Read the id again next time (after `make clean`-like resets, and in tests)."""
    _known.clear()


def _derive() -> str:
    try:
        return _from_database()
    except SynchronousOnlyOperation:
        # First asked from a thread running an event loop (a crawl's reactor): ask from a plain thread instead.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(_from_database_closing).result()


def _from_database_closing() -> str:
    try:
        return _from_database()
    finally:
        connection.close()


def _from_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, applied FROM django_migrations ORDER BY id LIMIT 1")
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the database is not migrated yet: run `manage.py migrate` (Trawl's Redis keys need it)")
    return hashlib.sha256(f"{row[0]}:{row[1]}".encode()).hexdigest()[:8]
