"""The fixtures of the frontier tests (tests/crawls/test_frontier_*.py): a job's frontier, emptied before and after,
and the test site's chain of slow pages."""

from __future__ import annotations

import pytest

from crawls.services.shards import job_frontier


@pytest.fixture
def frontier(settings):
    settings.TRAWL_FRONTIER_LEASE_SECONDS = 30
    front = job_frontier("test-job", attempt=1, shard=0)
    front.delete()
    yield front
    front.delete()


@pytest.fixture
def slow_chain(site):
    delay, site.slow_delay = site.slow_delay, 0.3
    yield site
    site.slow_delay = delay
