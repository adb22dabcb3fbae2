from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def stats_prefix(settings):
    """Counters of this test only, under a Redis prefix of their own, removed afterwards."""
    from project.redis import get_redis

    settings.TRAWL_STATS_PREFIX = f"test-stats:{uuid.uuid4().hex[:12]}"
    yield settings.TRAWL_STATS_PREFIX
    client = get_redis()
    keys = list(client.scan_iter(match=f"{settings.TRAWL_STATS_PREFIX}:*"))
    if keys:
        client.delete(*keys)
